"""A strict pre-scan of a KB file before any RDF parser sees it.

owlready2's parser is fast but trusts its input. Here the standard-library expat parser (the one
defusedxml hardens) reads the bytes first and refuses anything that could make a later parser
fetch or expand content: a DOCTYPE that points outside the file, any entity declaration (internal
or external, which covers "billion laughs" bombs), and external entity references. It also turns
the vague failures of a damaged file (empty, truncated, not UTF-8, not RDF) into one clear sentence.
Nothing is ever fetched or expanded: the checks fire on the declaration itself.
"""

from __future__ import annotations

import os
import re
import stat
import xml.parsers.expat as expat
from pathlib import Path

from kmds_desktop.kb.model import KnowledgeBaseError
from kmds_desktop.kb.vocabulary import RDF_NS

_RDF_ROOT = f"{RDF_NS} RDF"
_ENCODING_DECL = re.compile(rb"""^\s*<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")


class _Refused(Exception):  # noqa: N818 - internal signal carrying the user-facing reason
    pass


#: The largest KB file read (bytes): a 10,000-observation KB is about 10 MB; far larger input is
#: refused before it is read, not parsed until memory runs out.
MAX_KB_BYTES = 256 * 1024 * 1024


def read_kb_bytes(path: Path, limit: int = MAX_KB_BYTES) -> bytes:
    """Read a KB file, turning OS errors into :class:`KnowledgeBaseError` that name the file.

    Regular files only: a FIFO would block forever and a device such as ``/dev/zero`` never ends.
    The file is opened without blocking and checked on the open descriptor (so a path swapped
    after a check cannot slip through), and at most ``limit`` bytes are read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise KnowledgeBaseError("file not found", path=path) from None
    except IsADirectoryError:
        raise KnowledgeBaseError("is a folder, not a knowledge-base file", path=path) from None
    except PermissionError:
        raise KnowledgeBaseError("permission denied: the file cannot be read", path=path) from None
    except OSError as exc:
        raise KnowledgeBaseError(f"cannot be read ({exc.strerror or exc})", path=path) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise KnowledgeBaseError("is a folder, not a knowledge-base file", path=path)
        if not stat.S_ISREG(info.st_mode):
            raise KnowledgeBaseError(
                f"is not a regular file (it is a {_file_kind(info.st_mode)}); "
                "open a KMDS knowledge-base file",
                path=path)
        if info.st_size > limit:
            raise KnowledgeBaseError(
                f"the file is too large ({info.st_size:,} bytes; at most {limit:,} are read)", path=path)
        chunks: list[bytes] = []
        size = 0
        while True:  # read to the end, never past the limit (the file may grow while it is read)
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise KnowledgeBaseError(f"the file is too large (more than {limit:,} bytes)", path=path)
        data = b"".join(chunks)
    except PermissionError:
        raise KnowledgeBaseError("permission denied: the file cannot be read", path=path) from None
    except OSError as exc:
        raise KnowledgeBaseError(f"cannot be read ({exc.strerror or exc})", path=path) from None
    finally:
        os.close(fd)
    if not data.strip():
        raise KnowledgeBaseError("the file is empty (expected KMDS RDF/XML)", path=path)
    return data


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"


def prescan_rdfxml(data: bytes, path: Path) -> None:
    """Check ``data`` is safe, well-formed RDF/XML; raise :class:`KnowledgeBaseError` otherwise."""
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    root: list[str] = []

    def doctype(name: str, sysid: str | None, pubid: str | None, has_internal_subset: int) -> None:
        if sysid or pubid:
            raise _Refused(
                f"refused: the DOCTYPE refers to an external document ({sysid or pubid!r}); "
                "KMDS files never need one"
            )

    def entity_decl(name: str, is_param: int, value, base, sysid, pubid, notation) -> None:  # noqa: ANN001
        where = f" pointing to {sysid!r}" if sysid else ""
        raise _Refused(
            f"refused: the file declares an XML entity ({name!r}{where}); entity declarations "
            "are not allowed because they can fetch outside content or expand without bound"
        )

    def unparsed_entity(name: str, base, sysid, pubid, notation) -> None:  # noqa: ANN001
        raise _Refused(f"refused: the file declares an external entity ({name!r} -> {sysid!r})")

    def external_ref(context, base, sysid, pubid) -> int:  # noqa: ANN001
        raise _Refused(f"refused: the file references external content ({sysid or pubid!r})")

    def first_element(name: str, attrs) -> None:  # noqa: ANN001
        root.append(name)
        parser.StartElementHandler = None  # only the root matters; keeps the scan in C

    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity_decl
    parser.UnparsedEntityDeclHandler = unparsed_entity
    parser.ExternalEntityRefHandler = external_ref
    parser.StartElementHandler = first_element
    try:
        parser.Parse(data, True)
    except _Refused as exc:
        raise KnowledgeBaseError(str(exc), path=path) from None
    except expat.ExpatError as exc:
        raise KnowledgeBaseError(_describe_xml_error(data, exc), path=path) from None
    except (ValueError, LookupError) as exc:  # an encoding the XML parser cannot read (UTF-7, EUC-JP)
        raise KnowledgeBaseError(f"cannot be read: its encoding is not supported ({exc}); save it as "
                                 "UTF-8", path=path) from None
    if not root or root[0] != _RDF_ROOT:
        found = root[0].replace(" ", "}") if root else "nothing"
        if root and " " in root[0]:
            found = "{" + found
        raise KnowledgeBaseError(
            f"this is XML but not RDF/XML (root element is <{found}>, expected <rdf:RDF>); "
            "open a KMDS knowledge-base file",
            path=path,
        )


def _describe_xml_error(data: bytes, exc: expat.ExpatError) -> str:
    """Turn an expat error into a sentence a researcher can act on."""
    encoding = "utf-8"
    match = _ENCODING_DECL.match(data[:200])
    if match:
        encoding = match.group(1).decode("ascii").lower()
    if encoding.replace("_", "-") in ("utf-8", "utf8"):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            return (
                f"the file is not valid UTF-8 (bad byte 0x{data[err.start]:02x} at offset {err.start}); "
                "it may be damaged or saved in another encoding"
            )
    where = f"line {exc.lineno}, column {exc.offset}"
    code = getattr(exc, "code", None)
    if code in (expat.errors.codes.get(expat.errors.XML_ERROR_NO_ELEMENTS),) and exc.lineno > 1:
        return f"the XML ends too early at {where}: the file looks truncated"
    if code == expat.errors.codes.get(expat.errors.XML_ERROR_UNCLOSED_TOKEN):
        return f"the XML ends too early at {where}: the file looks truncated"
    text = data.lstrip()[:1]
    if text != b"<":
        return "this is not an XML file (a KMDS knowledge base is RDF/XML)"
    message = expat.errors.messages.get(code, str(exc)) if code else str(exc)
    return f"not well-formed XML ({message} at {where})"
