"""Kafka's ACL model, formats and decision (zkcoord.auth.acls): examples from Kafka's AuthorizerTest and
AclEntryTest, and properties against a direct reading of AclAuthorizer's rules."""

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkcoord.auth.acls import (
    IMPLIED_BY,
    OPERATIONS,
    PERMISSIONS,
    UNKNOWN,
    WILDCARD_PRINCIPAL,
    Acl,
    Authorizer,
    ResourcePattern,
    ResourcePatternFilter,
    decode_acls,
    decode_extended_change,
    decode_literal_change,
    encode_acls,
    encode_extended_change,
    encode_literal_change,
    kafka_host_address,
    parse_operation,
    parse_super_users,
)

TOPIC = "foo-1"
HOST1, HOST2 = "192.168.1.1", "192.168.1.2"
ALICE, ROB, BATMAN = "User:alice", "User:rob", "User:batman"
ALLOW_READ = Acl(WILDCARD_PRINCIPAL, "*", "Read", "Allow")
ALLOW_WRITE = Acl(WILDCARD_PRINCIPAL, "*", "Write", "Allow")
DENY_READ = Acl(WILDCARD_PRINCIPAL, "*", "Read", "Deny")
REQUESTABLE = tuple(op for op in OPERATIONS if op != "All")


def topic(name: str = TOPIC, pattern_type: str = "LITERAL") -> ResourcePattern:
    return ResourcePattern("Topic", name, pattern_type)


def authorizer_with(*bindings: tuple[ResourcePattern, set[Acl]], **config) -> Authorizer:
    authorizer = Authorizer(**config)
    for pattern, acls in bindings:
        authorizer.set_acls(pattern, acls | authorizer.acls(pattern))
    return authorizer


def test_topic_acl():
    """AuthorizerTest.testTopicAcl."""
    authorizer = authorizer_with(
        (
            topic(),
            {
                Acl(ALICE, HOST1, "Read", "Allow"),
                Acl(ALICE, HOST2, "Read", "Allow"),
                Acl(ALICE, HOST1, "Read", "Deny"),
                Acl(ALICE, HOST1, "Write", "Allow"),
                Acl(ALICE, "*", "Describe", "Allow"),
                Acl(ROB, "*", "Read", "Allow"),
                Acl(BATMAN, "*", "Write", "Allow"),
            },
        )
    )

    def allowed(principal, host, operation):
        return authorizer.authorize(principal, host, operation, "Topic", TOPIC)

    assert allowed(ALICE, HOST2, "Read")
    assert not allowed(ALICE, HOST1, "Read")  # the Deny
    assert allowed(ALICE, HOST1, "Write")
    assert not allowed(ALICE, HOST2, "Write")
    assert allowed(ALICE, HOST1, "Describe") and allowed(ALICE, HOST2, "Describe")
    assert not allowed(ALICE, HOST1, "Alter") and not allowed(ALICE, HOST2, "Alter")
    assert allowed(ROB, HOST1, "Describe") and allowed(BATMAN, HOST1, "Describe")  # implied by Read, Write
    assert allowed(ROB, HOST1, "Read") and allowed(BATMAN, HOST1, "Write")


def test_deny_takes_precedence_and_allow_all():
    """AuthorizerTest.testDenyTakesPrecedence and testAllowAllAccess."""
    allow_all = Acl(WILDCARD_PRINCIPAL, "*", "All", "Allow")
    authorizer = authorizer_with((topic(), {allow_all}))
    assert authorizer.authorize("User:random", "192.0.4.4", "Read", "Topic", TOPIC)
    authorizer.set_acls(topic(), {allow_all, Acl(ALICE, "192.168.2.1", "All", "Deny")})
    assert not authorizer.authorize(ALICE, "192.168.2.1", "Read", "Topic", TOPIC)
    assert authorizer.authorize(ALICE, "192.168.2.2", "Read", "Topic", TOPIC)


def test_super_users_have_access_whatever_the_acls():
    """AuthorizerTest.testSuperUserHasAccess, with super.users parsed as Kafka parses it."""
    authorizer = Authorizer.from_properties({"super.users": " User:superuser1; User:superuser2 "})
    authorizer.set_acls(topic(), {Acl(WILDCARD_PRINCIPAL, "*", "All", "Deny")})
    assert authorizer.authorize("User:superuser1", "192.0.4.4", "Read", "Topic", TOPIC)
    assert authorizer.authorize("User:superuser2", "192.0.4.4", "Read", "Topic", TOPIC)
    assert not authorizer.authorize("User:other", "192.0.4.4", "Read", "Topic", TOPIC)


def test_wildcard_acls():
    """AuthorizerTest.testWildCardAcls."""
    authorizer = Authorizer()
    assert not authorizer.authorize(ALICE, HOST1, "Read", "Topic", TOPIC)  # no ACLs: fail closed
    authorizer.set_acls(topic("*"), {Acl(ALICE, HOST1, "Read", "Allow")})
    assert authorizer.authorize(ALICE, HOST1, "Read", "Topic", TOPIC)
    authorizer.set_acls(topic(), {Acl(ALICE, HOST1, "Write", "Allow")})
    authorizer.set_acls(topic("*"), authorizer.acls(topic("*")) | {Acl(ALICE, HOST1, "Write", "Deny")})
    assert not authorizer.authorize(ALICE, HOST1, "Write", "Topic", TOPIC)


def test_no_acl_found_follows_allow_everyone():
    """AuthorizerTest.testNoAclFound / testNoAclFoundOverride / testAclConfigWithWhitespace: only when no pattern
    that applies to the resource has any ACL at all."""
    assert not Authorizer().authorize(ALICE, HOST1, "Read", "Topic", TOPIC)
    everyone = Authorizer.from_properties({"allow.everyone.if.no.acl.found": " true "})
    assert everyone.authorize(ALICE, HOST1, "Read", "Topic", TOPIC)
    everyone.set_acls(topic("foo", "PREFIXED"), {Acl(ROB, "*", "Read", "Allow")})
    assert not everyone.authorize(ALICE, HOST1, "Read", "Topic", TOPIC)  # an ACL applies, just not to alice
    assert everyone.authorize(ALICE, HOST1, "Read", "Topic", "bar")


def test_empty_resource_name_and_single_character_prefix():
    """AuthorizerTest.testAuthorizeWithEmptyResourceName and testSingleCharacterResourceAcls."""
    authorizer = Authorizer()
    assert not authorizer.authorize(ALICE, HOST1, "Read", "Group", "")
    authorizer.set_acls(ResourcePattern("Group", "*"), {ALLOW_READ})
    assert authorizer.authorize(ALICE, HOST1, "Read", "Group", "")

    authorizer.set_acls(topic("f"), {ALLOW_READ})
    assert authorizer.authorize(ALICE, HOST1, "Read", "Topic", "f")
    assert not authorizer.authorize(ALICE, HOST1, "Read", "Topic", "foo")
    authorizer.set_acls(topic("_", "PREFIXED"), {ALLOW_READ})
    assert authorizer.authorize(ALICE, HOST1, "Read", "Topic", "_foo")
    assert authorizer.authorize(ALICE, HOST1, "Read", "Topic", "_")
    assert not authorizer.authorize(ALICE, HOST1, "Read", "Topic", "foo_")


def test_prefixed_resources():
    """AuthorizerTest.testAuthorizeWithPrefixedResource: Denies on neighbouring prefixes do not apply."""
    authorizer = Authorizer()
    for name, pattern_type in [
        ("a_other", "LITERAL"),
        ("a_other", "PREFIXED"),
        ("foo-x", "PREFIXED"),
        ("foo-1-zzz", "PREFIXED"),
        ("fooo-", "PREFIXED"),
        ("fo-", "PREFIXED"),
        ("fon-", "PREFIXED"),
        ("z_other", "PREFIXED"),
        ("z_other", "LITERAL"),
    ]:
        authorizer.set_acls(topic(name, pattern_type), {DENY_READ})
    authorizer.set_acls(topic("foo", "PREFIXED"), {ALLOW_READ})
    assert authorizer.authorize(ALICE, HOST1, "Read", "Topic", "foo-1")
    authorizer.set_acls(topic("foo-", "PREFIXED"), {DENY_READ})
    assert not authorizer.authorize(ALICE, HOST1, "Read", "Topic", "foo-1")


def test_acl_inheritance():
    """AuthorizerTest.testAclInheritance on the cluster resource: All allows and denies everything; Read, Write,
    Delete and Alter allow Describe; AlterConfigs allows DescribeConfigs; a Deny implies nothing."""
    cluster = ResourcePattern("Cluster", "kafka-cluster")
    expectations = {
        ("All", "Allow"): set(REQUESTABLE),
        ("Read", "Allow"): {"Read", "Describe"},
        ("Write", "Allow"): {"Write", "Describe"},
        ("Delete", "Allow"): {"Delete", "Describe"},
        ("Alter", "Allow"): {"Alter", "Describe"},
        ("AlterConfigs", "Allow"): {"AlterConfigs", "DescribeConfigs"},
        ("All", "Deny"): set(),
        ("Describe", "Deny"): set(REQUESTABLE) - {"Describe"},
        ("DescribeConfigs", "Deny"): set(REQUESTABLE) - {"DescribeConfigs"},
    }
    for (operation, permission), allowed in expectations.items():
        acls = {Acl(ALICE, "*", operation, permission)}
        if permission == "Deny":
            acls.add(Acl(ALICE, "*", "All", "Allow"))
        authorizer = authorizer_with((cluster, acls))
        got = {op for op in REQUESTABLE if authorizer.authorize(ALICE, HOST1, op, "Cluster", "kafka-cluster")}
        assert got == allowed, (operation, permission)


def test_wildcard_principal_matches_any_principal_type():
    authorizer = authorizer_with((topic(), {Acl(WILDCARD_PRINCIPAL, "*", "Read", "Allow")}))
    assert authorizer.authorize("Service:billing", HOST1, "Read", "Topic", TOPIC)
    authorizer.set_acls(topic(), {Acl("Service:*", "*", "Read", "Allow")})
    assert not authorizer.authorize("Service:billing", HOST1, "Read", "Topic", TOPIC)  # only User:* is a wildcard


def test_resource_znode_json_is_kafkas():
    """AclEntryTest.testAclJsonConversion's document, and what Kafka tolerates or refuses."""
    kafka_json = (
        b'{"version":1,"acls":[{"host":"host1","permissionType":"Deny","operation":"READ","principal":"User:alice"},'
        b'{"host":"*","permissionType":"Allow","operation":"Read","principal":"User:bob"},'
        b'{"host":"host1","permissionType":"Deny","operation":"Read","principal":"User:bob"}]}'
    )
    assert decode_acls(kafka_json) == {
        Acl("User:alice", "host1", "Read", "Deny"),
        Acl("User:bob", "*", "Read", "Allow"),
        Acl("User:bob", "host1", "Read", "Deny"),
    }
    assert decode_acls(b"") == decode_acls(b"null") == frozenset()
    assert encode_acls([Acl(ALICE, "*", "DescribeConfigs", "Allow")]) == (  # as kafka-acls 3.9 wrote it
        b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"DescribeConfigs"}],'
        b'"version":1}'
    )
    newer = b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Teleport","host":"*"}]}'
    assert decode_acls(newer) == {Acl("User:a", "*", UNKNOWN, "Allow")}
    for bad in (b"{", b'{"version":2,"acls":[]}', b'{"version":1}', b'{"version":1,"acls":[{"principal":"alice"}]}'):
        with pytest.raises(ValueError, match="unreadable ACLs"):
            decode_acls(bad)


def test_an_unknown_operation_matches_nothing_but_counts_as_an_acl():
    authorizer = Authorizer(allow_everyone_if_no_acl_found=True)
    authorizer.set_acls(topic(), {Acl(ALICE, "*", UNKNOWN, "Allow")})
    assert not authorizer.authorize(ALICE, HOST1, "Read", "Topic", TOPIC)


def test_change_notifications_are_kafkas():
    """LiteralAclChangeStore writes the Java enum name (TRANSACTIONAL_ID, not TransactionalId)."""
    assert encode_literal_change(ResourcePattern("TransactionalId", "tx:1")) == b"TRANSACTIONAL_ID:tx:1"
    assert decode_literal_change(b"TRANSACTIONAL_ID:tx:1") == ResourcePattern("TransactionalId", "tx:1")
    assert decode_literal_change(b"Group:g") == ResourcePattern("Group", "g")
    assert json.loads(encode_extended_change(ResourcePattern("Group", "app-", "PREFIXED"))) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "app-",
        "patternType": "PREFIXED",
    }
    for bad in (b"Group", b"Planet:x", b"TransactionalId:x"):
        with pytest.raises(ValueError, match="unreadable ACL change notification"):
            decode_literal_change(bad)
    for bad in (
        b"[]",
        b'{"version":2,"resourceType":"GROUP","name":"a","patternType":"PREFIXED"}',
        b'{"version":1,"resourceType":"GROUP","name":"a","patternType":"prefixed"}',
    ):
        with pytest.raises(ValueError, match="unreadable ACL change notification"):
            decode_extended_change(bad)


def test_names_as_kafkas_tools_take_them():
    assert parse_operation("read") == parse_operation("READ") == "Read"
    assert parse_operation("describeconfigs") == "DescribeConfigs"
    with pytest.raises(ValueError, match="unknown operation 'DESCRIBE_CONFIGS'"):
        parse_operation("DESCRIBE_CONFIGS")  # SecurityUtils does not take the enum spelling either
    with pytest.raises(ValueError, match="unknown operation 'Raed'"):
        parse_operation("Raed")
    assert parse_super_users("User:a;User:b;") == {"User:a", "User:b"}
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_super_users("User:a;;User:b")


def test_host_address_as_java_writes_it():
    assert kafka_host_address("::1") == "0:0:0:0:0:0:0:1"
    assert kafka_host_address("fe80::1%eth0") == "fe80:0:0:0:0:0:0:1%eth0"
    assert kafka_host_address("::ffff:10.0.0.1") == "10.0.0.1"
    assert kafka_host_address("10.0.0.1") == "10.0.0.1"


def test_filters_as_kafkas():
    """AuthorizerTest.testAclsFilter's MATCH filter, and ANY."""
    foo, bar, bar_prefix = topic("foo-1"), topic("bar-1"), topic("bar-", "PREFIXED")
    match = ResourcePatternFilter(None, "bar-1", "MATCH")
    assert [p for p in (foo, bar, bar_prefix) if match.matches(p)] == [bar, bar_prefix]
    assert ResourcePatternFilter("Topic", "bar-", "ANY").matches(bar_prefix)
    assert not ResourcePatternFilter("Topic", "bar-", "LITERAL").matches(bar_prefix)
    assert ResourcePatternFilter("Topic", "x", "MATCH").matches(topic("*"))


# -- properties -------------------------------------------------------------------------------------------------

principals = st.sampled_from(["User:alice", "User:bob", WILDCARD_PRINCIPAL])
hosts = st.sampled_from(["10.0.0.1", "10.0.0.2", "*"])
acls = st.builds(Acl, principals, hosts, st.sampled_from(OPERATIONS), st.sampled_from(PERMISSIONS))
names = st.text("ab*", min_size=1, max_size=3)
resource_types = st.sampled_from(["Topic", "Group"])
patterns = st.builds(ResourcePattern, resource_types, names, st.sampled_from(["LITERAL", "PREFIXED"]))
tables = st.dictionaries(patterns, st.frozensets(acls, min_size=1, max_size=4), max_size=6)
requests = st.tuples(
    st.sampled_from(["User:alice", "User:bob"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from(REQUESTABLE),
    st.sampled_from(["Topic", "Group"]),
    names,
)


def filled(table, **config) -> Authorizer:
    authorizer = Authorizer(**config)
    for pattern, entries in table.items():
        authorizer.set_acls(pattern, entries)
    return authorizer


def reference_authorize(table, principal, host, operation, resource_type, name, allow_everyone) -> bool:
    """AclAuthorizer's rules read straight, over every pattern (the code under test looks up prefixes instead)."""
    applicable = [
        acl
        for pattern, entries in table.items()
        if pattern.resource_type == resource_type
        and (
            (pattern.pattern_type == "LITERAL" and pattern.name in (name, "*"))
            or (pattern.pattern_type == "PREFIXED" and name.startswith(pattern.name))
        )
        for acl in entries
    ]
    if not applicable:
        return allow_everyone

    def matching(acl, permission, ops):
        return (
            acl.permission == permission
            and acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.operation in (*ops, "All")
            and acl.host in (host, "*")
        )

    if any(matching(acl, "Deny", [operation]) for acl in applicable):
        return False
    return any(matching(acl, "Allow", [operation, *IMPLIED_BY.get(operation, ())]) for acl in applicable)


@given(tables, requests, st.booleans())
def test_authorize_follows_kafkas_rules(table, request, allow_everyone):
    authorizer = filled(table, allow_everyone_if_no_acl_found=allow_everyone)
    assert authorizer.authorize(*request) == reference_authorize(table, *request, allow_everyone)


@given(tables, requests, st.booleans())
def test_a_matching_deny_always_beats_allow(table, request, deny_from_anywhere):
    principal, host, operation, resource_type, name = request
    deny_host = "*" if deny_from_anywhere else host
    denied = dict(table)
    for pattern, acl in [
        (ResourcePattern(resource_type, "*"), Acl(WILDCARD_PRINCIPAL, "*", "All", "Allow")),
        (ResourcePattern(resource_type, name[:1], "PREFIXED"), Acl(principal, host, operation, "Allow")),
        (ResourcePattern(resource_type, name), Acl(principal, deny_host, operation, "Deny")),
    ]:
        denied[pattern] = denied.get(pattern, frozenset()) | {acl}
    assert not filled(denied, allow_everyone_if_no_acl_found=True).authorize(*request)


@given(tables, requests)
def test_super_users_always_pass(table, request):
    principal = request[0]
    authorizer = filled(table, super_users=[principal])
    authorizer.set_acls(ResourcePattern(request[3], "*"), {Acl(WILDCARD_PRINCIPAL, "*", "All", "Deny")})
    assert authorizer.authorize(*request)


@given(st.frozensets(acls, max_size=8))
def test_resource_json_round_trip(entries):
    assert decode_acls(encode_acls(entries)) == entries


@given(patterns)
def test_change_notification_round_trip(pattern):
    if pattern.pattern_type == "LITERAL":
        assert decode_literal_change(encode_literal_change(pattern)) == pattern
    else:
        assert decode_extended_change(encode_extended_change(pattern)) == pattern


@given(st.sampled_from(REQUESTABLE), st.sampled_from(OPERATIONS))
def test_implication_table(requested, granted):
    """An Allow of ``granted`` allows ``requested`` exactly when Kafka's table says so; a Deny only denies the same
    operation or All."""
    allows = filled({topic(): frozenset({Acl(ALICE, "*", granted, "Allow")})})
    implied = granted == requested or granted == "All" or granted in IMPLIED_BY.get(requested, ())
    assert allows.authorize(ALICE, HOST1, requested, "Topic", TOPIC) == implied
    denies = filled({topic(): frozenset({Acl(ALICE, "*", granted, "Deny"), Acl(ALICE, "*", "All", "Allow")})})
    assert denies.authorize(ALICE, HOST1, requested, "Topic", TOPIC) == (granted not in (requested, "All"))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=15), inner, max_size=4),
    max_leaves=10,
)
entry_like = st.fixed_dictionaries({key: json_values for key in ("principal", "permissionType", "host", "operation")})
foreign = st.binary(max_size=64) | st.builds(
    lambda acls: json.dumps({"version": 1, "acls": acls}).encode(), json_values | st.lists(entry_like, max_size=2)
)


@given(foreign)
def test_foreign_data_raises_only_value_error(data):
    for decode in (decode_acls, decode_literal_change, decode_extended_change):
        with contextlib.suppress(ValueError):  # anything else escapes and fails the test
            decode(data)


def test_a_client_given_name_of_megabytes_is_decided_by_the_prefixes_that_exist_not_by_its_every_prefix():
    # A check once looked up each of a name's prefixes: a 2 MB group id stalled the node for hours (pytest's
    # timeout fails this test then).
    authorizer = Authorizer()
    authorizer.set_acls(ResourcePattern("Group", "team-", "PREFIXED"), {Acl("User:a", "*", "Read", "Allow")})
    huge = "team-" + "x" * 2_000_000
    assert authorizer.authorize("User:a", "10.0.0.1", "Read", "Group", huge)
    assert not authorizer.authorize("User:a", "10.0.0.1", "Read", "Group", "x" + huge)
    authorizer.set_acls(ResourcePattern("Group", "team-", "PREFIXED"), ())
    assert not authorizer.any_acl_on("Group", huge)
