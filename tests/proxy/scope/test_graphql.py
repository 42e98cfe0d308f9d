"""GraphQL scope: every operation that could run is judged, by a real parser."""

from __future__ import annotations

import json

import pytest

from airlock.proxy.scope.graphql import MAX_BODY, GraphQLRefused, check_body, operations_of


def body(query: str, name: str | None = None) -> bytes:
    data: dict[str, object] = {"query": query}
    if name is not None:
        data["operationName"] = name
    return json.dumps(data).encode()


Q = ["query"]
QM = ["query", "mutation"]


def test_query_allowed() -> None:
    check_body(body("query Viewer { viewer { login } }"), Q, None)
    check_body(body("{ viewer { login } }"), Q, None)  # anonymous shorthand is a query


def test_mutation_refused_for_queries_only() -> None:
    with pytest.raises(GraphQLRefused, match="mutation"):
        check_body(body("mutation M { addComment(input: {}) { id } }"), Q, None)


def test_words_inside_strings_are_not_operations() -> None:
    check_body(body('query { search(query: "mutation { x }") { n } } # mutation'), Q, None)


def test_two_operations_without_a_name_are_all_judged() -> None:
    doc = "query A { a } mutation B { b }"
    with pytest.raises(GraphQLRefused, match="mutation B"):
        check_body(body(doc), Q, None)
    check_body(body(doc, "A"), Q, None)  # only A can run
    with pytest.raises(GraphQLRefused):
        check_body(body(doc, "B"), Q, None)
    with pytest.raises(GraphQLRefused, match="not in the document"):
        check_body(body(doc, "C"), QM, None)


def test_batch_with_one_mutation_is_refused() -> None:
    batch = json.dumps([{"query": "{ a }"}, {"query": "mutation { b }"}]).encode()
    with pytest.raises(GraphQLRefused, match="mutation"):
        check_body(batch, Q, None)
    check_body(batch, QM, None)
    assert len(operations_of(batch)) == 2


def test_subscriptions_never() -> None:
    with pytest.raises(GraphQLRefused, match="subscription"):
        check_body(body("subscription S { x }"), QM, None)


def test_names() -> None:
    check_body(body("query PullRequest { a }"), Q, ["PullRequest"])
    with pytest.raises(GraphQLRefused, match="names"):
        check_body(body("query Other { a }"), Q, ["PullRequest"])
    with pytest.raises(GraphQLRefused, match="names"):
        check_body(body("{ a }"), Q, ["PullRequest"])


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        body("query {"),
        b'{"id": "persisted-123"}',
        b"[]",
        b'"{ a }"',
        body("type T { a: Int }"),
        body("fragment F on T { a }"),
        b'{"query": "{ a }", "query": "mutation { b }"}',
        b'{"query": "{ a }", "operationName": null, "operationName": "B"}',
    ],
)
def test_unjudgeable_bodies_are_refused(raw: bytes) -> None:
    with pytest.raises(GraphQLRefused):
        check_body(raw, QM, None)


def test_body_over_one_mib_is_refused() -> None:
    big = body("{ a }" + " " * MAX_BODY)
    with pytest.raises(GraphQLRefused, match="over"):
        check_body(big, QM, None)


def test_deep_documents_do_not_crash() -> None:
    deep = "{" * 5000 + "a" + "}" * 5000
    with pytest.raises(GraphQLRefused):
        check_body(body(deep), QM, None)
