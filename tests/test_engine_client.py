"""The engine connection (:func:`proctor.sandbox.engine.docker_client`): one API version
negotiation per engine and process, a stale one asked again, an absent engine a retryable
error."""

from __future__ import annotations

import pytest
from docker.api.client import APIClient

from proctor.errors import EngineUnavailable
from proctor.sandbox import engine

pytestmark = pytest.mark.docker


@pytest.fixture
def no_versions(monkeypatch):
    """This test's own cache of negotiated versions (empty), and a count of negotiations."""
    monkeypatch.setattr(engine, "_API_VERSIONS", {})
    asked = []
    real = APIClient._retrieve_server_version

    def counted(self):
        asked.append(1)
        return real(self)

    monkeypatch.setattr(APIClient, "_retrieve_server_version", counted)
    return asked


def test_the_api_version_is_negotiated_once_per_engine(no_versions, docker_engine):
    if docker_engine is None:
        pytest.skip("no Docker engine")
    first = engine.docker_client(timeout=10)
    second = engine.docker_client(timeout=10)
    assert len(no_versions) == 1
    assert second.api.api_version == first.api.api_version == first.version()["ApiVersion"]
    assert second.ping()


def test_a_version_the_engine_refuses_is_negotiated_again(no_versions, docker_engine,
                                                         monkeypatch):
    if docker_engine is None:
        pytest.skip("no Docker engine")
    # an engine replaced by one that no longer serves the version kept (too old for any)
    monkeypatch.setitem(engine._API_VERSIONS, engine.os.environ.get("DOCKER_HOST", ""),
                        "1.12")
    client = engine.docker_client(timeout=10)
    assert len(no_versions) == 1
    assert client.api.api_version == client.version()["ApiVersion"] != "1.12"
    assert engine._API_VERSIONS[engine.os.environ.get("DOCKER_HOST", "")] == \
        client.api.api_version


def test_no_engine_is_a_retryable_error_with_a_known_version(no_versions, monkeypatch):
    host = "unix:///nonexistent/proctor-test.sock"
    monkeypatch.setenv("DOCKER_HOST", host)
    monkeypatch.setitem(engine._API_VERSIONS, host, "1.43")
    with pytest.raises(EngineUnavailable, match="scripts/provision-docker.sh"):
        engine.docker_client(timeout=2)
    assert engine._API_VERSIONS == {host: "1.43"}
