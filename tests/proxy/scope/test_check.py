"""check_head: methods, paths, GraphQL routing and path tricks, as one decision."""

from __future__ import annotations

import json

import pytest

from airlock.proxy.protocol import Allow, GraphQLAllow
from airlock.proxy.scope.check import ALLOWED, BodyGate, GraphQLGate, Refusal, check_head

READ = Allow(methods=["get", "HEAD"], graphql=GraphQLAllow(operations=["query"]))
REPO = Allow(
    paths=["/repos/acme/widgets/**", "/user"],
    graphql=GraphQLAllow(operations=["query", "mutation"]),
)


def test_methods() -> None:
    assert check_head(READ, "api.github.com", "GET", "/repos/acme/widgets") is ALLOWED
    refused = check_head(READ, "api.github.com", "DELETE", "/repos/acme/widgets")
    assert isinstance(refused, Refusal)
    assert "api.github.com" in refused.message and "DELETE" in refused.message


def test_paths() -> None:
    assert check_head(REPO, "api.github.com", "POST", "/repos/acme/widgets/pulls") is ALLOWED
    assert check_head(REPO, "api.github.com", "GET", "/user?x=1") is ALLOWED
    refused = check_head(REPO, "api.github.com", "GET", "/repos/acme/other")
    assert isinstance(refused, Refusal) and "/repos/acme/other" in refused.message


@pytest.mark.parametrize(
    "target",
    [
        "/repos/acme/widgets%2F..%2F..%2Fother",
        "/repos/acme/widgets/%2e%2e/%2e%2e/other",
        "/repos/acme/widgets/../other",
        "/repos/acme/other/../widgets/pulls",  # normalises inside, but raw it names other
        "/repos/acme/widgets/../../acme/other/pulls",
        "//repos/acme/widgets",
        "/repos/acme/widgets\\..\\other",
        "/repos/acme/widgets/%00",
    ],
)
def test_path_tricks_are_refused(target: str) -> None:
    assert isinstance(check_head(REPO, "api.github.com", "GET", target), Refusal)


def test_graphql_goes_to_a_gate() -> None:
    gate = check_head(READ, "api.github.com", "POST", "/graphql")
    assert isinstance(gate, GraphQLGate)
    assert gate.feed(json.dumps({"query": "{ viewer {"}).encode()[:5], False) is None
    assert isinstance(gate.feed(b"", True), Refusal)
    gate2 = check_head(READ, "api.github.com", "POST", "/graphql")
    assert isinstance(gate2, BodyGate)
    assert gate2.feed(json.dumps({"query": "{ viewer { login } }"}).encode(), True) is ALLOWED
    assert isinstance(check_head(READ, "api.github.com", "GET", "/graphql?query=x"), Refusal)
    encoded = check_head(READ, "api.github.com", "POST", "/graphql", content_encoding="gzip")
    assert isinstance(encoded, Refusal)


def test_graphql_without_a_graphql_rule_follows_paths() -> None:
    paths_only = Allow(paths=["/repos/acme/widgets/**"])
    assert isinstance(check_head(paths_only, "api.github.com", "POST", "/graphql"), Refusal)
