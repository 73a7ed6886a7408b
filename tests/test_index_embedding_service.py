"""The index process's embedding service: same vectors as in-process, token required, clear errors."""

from __future__ import annotations

import http.client
import json
import socket

import numpy as np
import pytest

from kmds_desktop.index import embedding_service, embeddings
from kmds_desktop.index.errors import IndexProcessStopped, IndexStoreError, ModelLoadError

TEXTS = ["Seasonality dominates weekly sales", "cystic fibrosis and azithromycin"]


@pytest.fixture(scope="module")
def service() -> tuple[int, str]:
    token = "t0k3n-for-this-test"
    return embedding_service.start(token), token


def test_remote_vectors_equal_local_ones(service: tuple[int, str]) -> None:
    port, token = service
    remote = embedding_service.encode_remote("127.0.0.1", port, token, TEXTS, embeddings.DEFAULT_MODEL)
    local = embeddings.encode(TEXTS, embeddings.DEFAULT_MODEL)
    assert remote.shape == local.shape == (2, local.shape[1]) and remote.dtype == np.float32
    np.testing.assert_allclose(remote, local, atol=1e-6)
    remote[0, 0] = 1.0  # callers may write into what they get
    empty = embedding_service.encode_remote("127.0.0.1", port, token, [], embeddings.DEFAULT_MODEL)
    assert empty.shape == (0, local.shape[1])


def test_a_wrong_token_is_refused(service: tuple[int, str]) -> None:
    port, _ = service
    with pytest.raises(IndexStoreError, match="wrong token"):
        embedding_service.encode_remote("127.0.0.1", port, "guess", TEXTS, embeddings.DEFAULT_MODEL)


def test_an_unknown_model_is_a_model_load_error(service: tuple[int, str]) -> None:
    port, token = service
    with pytest.raises(ModelLoadError, match="no-such-model"):
        embedding_service.encode_remote("127.0.0.1", port, token, TEXTS, "no-such-model")


def test_bad_and_oversized_requests_get_a_clear_status(service: tuple[int, str]) -> None:
    port, token = service

    def post(body: bytes, length: int | None = None) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Length": str(length or len(body))}
        conn.request("POST", embedding_service.PATH, body=body, headers=headers)
        response = conn.getresponse()
        status, text = response.status, json.loads(response.read())["error"]
        conn.close()
        return status, text

    assert post(b'{"texts": "not a list", "model": "m"}')[0] == 400
    assert post(b'{"texts": [1, 2], "model": "m"}') == (400, "bad request: texts must be strings")
    status, text = post(b"{}", length=embedding_service.MAX_REQUEST_BYTES + 1)
    assert status == 413 and "request body" in text


def test_a_process_that_is_gone_reads_as_stopped() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    with pytest.raises(IndexProcessStopped):
        embedding_service.encode_remote("127.0.0.1", port, "x", TEXTS, embeddings.DEFAULT_MODEL)
