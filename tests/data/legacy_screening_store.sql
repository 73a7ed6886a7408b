BEGIN TRANSACTION;
CREATE TABLE decision (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        decision TEXT NOT NULL CHECK (decision IN ('include', 'exclude', 'maybe')),
        reason TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '', score REAL,
        decided_at TEXT NOT NULL, PRIMARY KEY (review_id, source, external_id)) WITHOUT ROWID;
INSERT INTO "decision" VALUES('sweat','CF','cf:3','exclude','wrong population','children only',NULL,'2026-12-03T13:47:06+00:00');
INSERT INTO "decision" VALUES('sweat','pubmed','3896327','include','','',NULL,'2026-12-03T13:47:06+00:00');
CREATE TABLE decision_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, review_id TEXT NOT NULL, source TEXT NOT NULL,
        external_id TEXT NOT NULL, before TEXT, after TEXT, at TEXT NOT NULL);
INSERT INTO "decision_log" VALUES(1,'sweat','pubmed','3896327',NULL,'{"decision": "include", "reason": "", "note": "", "score": null, "decided_at": "2026-12-03T13:47:06+00:00"}','2026-12-03T13:47:06+00:00');
INSERT INTO "decision_log" VALUES(2,'sweat','CF','cf:3',NULL,'{"decision": "exclude", "reason": "wrong population", "note": "children only", "score": null, "decided_at": "2026-12-03T13:47:06+00:00"}','2026-12-03T13:47:06+00:00');
CREATE TABLE flow_number (
        review_id TEXT NOT NULL, name TEXT NOT NULL, value INTEGER NOT NULL, note TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (review_id, name)) WITHOUT ROWID;
CREATE TABLE model_score (
        model TEXT NOT NULL, question TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        score INTEGER, reason TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '',
        scored_at TEXT NOT NULL, PRIMARY KEY (model, question, source, external_id)) WITHOUT ROWID;
CREATE TABLE other_decision (
        review_id TEXT NOT NULL, reviewer TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        decision TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT '',
        decided_at TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (review_id, reviewer, source, external_id)) WITHOUT ROWID;
CREATE TABLE record_flag (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL, flag TEXT NOT NULL,
        value TEXT NOT NULL DEFAULT '', at TEXT NOT NULL,
        PRIMARY KEY (review_id, source, external_id, flag)) WITHOUT ROWID;
CREATE TABLE record_round (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL, round INTEGER NOT NULL,
        PRIMARY KEY (review_id, source, external_id)) WITHOUT ROWID;
CREATE TABLE record_vector (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL, model TEXT NOT NULL,
        vector BLOB NOT NULL, PRIMARY KEY (review_id, source, external_id, model)) WITHOUT ROWID;
CREATE TABLE review (
        id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', question TEXT NOT NULL DEFAULT '',
        reasons TEXT NOT NULL, created_at TEXT NOT NULL, settings TEXT NOT NULL DEFAULT '{}');
INSERT INTO "review" VALUES('sweat','sweat','sweat testing in cystic fibrosis','["wrong population", "wrong intervention", "wrong outcome", "wrong study design", "wrong publication type", "foreign language", "duplicate"]','2026-12-03T13:47:06+00:00','{}');
CREATE TABLE review_question (
        review_id TEXT NOT NULL, position INTEGER NOT NULL, text TEXT NOT NULL,
        PRIMARY KEY (review_id, position)) WITHOUT ROWID;
CREATE TABLE review_record (
        review_id TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        position INTEGER NOT NULL, origin TEXT NOT NULL DEFAULT '', data TEXT NOT NULL,
        PRIMARY KEY (review_id, source, external_id)) WITHOUT ROWID;
INSERT INTO "review_record" VALUES('sweat','CF','cf:3',3,'#1','{"source": "CF", "external_id": "cf:3", "title": "Pancreatic enzymes", "abstract": "Enzymes.", "authors": [], "year": 1979, "journal": "", "doi": "", "pmid": "", "url": "", "keywords": [], "found_by": ["#1 row 2: pancreas"], "rank": 2, "doc_id": 3, "origins": ["#1"], "aliases": []}');
INSERT INTO "review_record" VALUES('sweat','file:refs.ris','9f2c',2,'#1','{"source": "file:refs.ris", "external_id": "9f2c", "title": "Nasal potential difference", "abstract": "", "authors": [], "year": null, "journal": "", "doi": "", "pmid": "", "url": "", "keywords": [], "found_by": [], "rank": null, "doc_id": null, "origins": ["file refs.ris"], "aliases": []}');
INSERT INTO "review_record" VALUES('sweat','pubmed','3896327',1,'#1','{"source": "pubmed", "external_id": "3896327", "title": "Sweat chloride in cystic fibrosis", "abstract": "A study of sweat tests.", "authors": ["Doe J", "Roe R"], "year": 1985, "journal": "Acta Paediatr Scand", "doi": "10.1111/j.1651-2227.1985.tb10002.x", "pmid": "3896327", "url": "https://pubmed.ncbi.nlm.nih.gov/3896327/", "keywords": ["sweat"], "found_by": ["#1 row 1: sweat AND chloride"], "rank": 1, "doc_id": 17, "origins": ["#1"], "aliases": [["medrxiv", "10.1111/j.1651-2227.1985.tb10002.x"]], "volume": "74", "issue": "3", "pages": "123-9"}');
CREATE TABLE review_run (
        review_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, at TEXT NOT NULL,
        strategy_version INTEGER, strategy_text TEXT NOT NULL DEFAULT '', origin TEXT NOT NULL DEFAULT '',
        counts TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (review_id, seq)) WITHOUT ROWID;
CREATE TABLE review_source (
        review_id TEXT NOT NULL, origin TEXT NOT NULL, identified INTEGER NOT NULL,
        per_row TEXT NOT NULL DEFAULT '{}', added_at TEXT NOT NULL,
        PRIMARY KEY (review_id, origin)) WITHOUT ROWID;
INSERT INTO "review_source" VALUES('sweat','#1',3,'{"row 1: sweat": 3}','2026-12-03T13:47:06.078204+00:00');
CREATE TABLE review_strategy (
        review_id TEXT NOT NULL, version INTEGER NOT NULL, searches TEXT NOT NULL, text TEXT NOT NULL,
        saved_at TEXT NOT NULL, note TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (review_id, version)) WITHOUT ROWID;
CREATE TABLE source_record (
        review_id TEXT NOT NULL, origin TEXT NOT NULL, source TEXT NOT NULL, external_id TEXT NOT NULL,
        PRIMARY KEY (review_id, origin, source, external_id)) WITHOUT ROWID;
INSERT INTO "source_record" VALUES('sweat','#1','CF','cf:3');
INSERT INTO "source_record" VALUES('sweat','#1','file:refs.ris','9f2c');
INSERT INTO "source_record" VALUES('sweat','#1','pubmed','3896327');
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('decision_log',2);
COMMIT;
