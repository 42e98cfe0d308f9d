"""Offline checks for Kubernetes manifests: strict model validation and a small
NetworkPolicy evaluator.

The evaluator implements the parts of the NetworkPolicy semantics the manifests
use (podSelector/namespaceSelector with matchLabels, ipBlock with except, ports
with protocol and endPort), so the tests can ask the question the issue asks
("may a sandbox pod reach X on port P?") instead of pattern-matching YAML.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import yaml

Doc = dict[str, Any]


def load_docs(path: Path) -> list[Doc]:
    """Every non-empty YAML document in ``path``."""
    with path.open(encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def model_class(doc: Mapping[str, Any]) -> type[Any]:
    """The kubernetes client model for a document's apiVersion and kind."""
    version = str(doc["apiVersion"]).rsplit("/", 1)[-1]
    name = f"{version[0].upper()}{version[1:]}{doc['kind']}"
    cls = getattr(k8s, name, None)
    if cls is None:
        raise LookupError(
            f"no kubernetes client model {name} for {doc['apiVersion']}/{doc['kind']}"
        )
    return cls  # type: ignore[no-any-return]


def _legacy_validate(cls: type[Any], data: Any, where: str) -> list[str]:
    """Strict walk for the pre-pydantic (swagger-codegen) kubernetes models."""
    errors: list[str] = []
    if not isinstance(data, dict):
        return [f"{where}: expected a mapping for {cls.__name__}"]
    by_json = {v: k for k, v in cls.attribute_map.items()}
    for key, value in data.items():
        attr = by_json.get(key)
        if attr is None:
            errors.append(f"{where}.{key}: unknown field of {cls.__name__}")
            continue
        errors += _legacy_value(cls.openapi_types[attr], value, f"{where}.{key}")
    try:
        kwargs = {by_json[key]: value for key, value in data.items() if key in by_json}
        cls(**kwargs)
    except ValueError as exc:
        errors.append(f"{where}: {exc}")
    return errors


def _legacy_value(type_name: str, value: Any, where: str) -> list[str]:
    if value is None:
        return []
    list_match = re.fullmatch(r"list\[(.+)\]", type_name)
    if list_match:
        if not isinstance(value, list):
            return [f"{where}: expected a list"]
        return [
            e
            for i, v in enumerate(value)
            for e in _legacy_value(list_match.group(1), v, f"{where}[{i}]")
        ]
    dict_match = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if dict_match:
        if not isinstance(value, dict):
            return [f"{where}: expected a mapping"]
        return [
            e
            for key, v in value.items()
            for e in _legacy_value(dict_match.group(1), v, f"{where}.{key}")
        ]
    sub = getattr(k8s, type_name, None)
    if sub is not None and hasattr(sub, "attribute_map"):
        return _legacy_validate(sub, value, where)
    return []


def validation_errors(doc: Mapping[str, Any]) -> list[str]:
    """Why ``doc`` does not deserialise into its model ([] when it does).

    Unknown fields and missing required fields are both errors, at any depth.
    """
    cls = model_class(doc)
    if hasattr(cls, "model_validate"):
        import pydantic

        try:
            cls.model_validate(dict(doc))
        except pydantic.ValidationError as exc:
            return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        return []
    return _legacy_validate(cls, dict(doc), doc["kind"])


# --- NetworkPolicy evaluation -------------------------------------------------


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: Mapping[str, str]


@dataclass(frozen=True)
class External:
    ip: str


Endpoint = Pod | External


@dataclass
class Cluster:
    """Namespaces (name -> labels) and the NetworkPolicies in force."""

    namespaces: dict[str, dict[str, str]]
    policies: list[Doc] = field(default_factory=list)

    def ns_labels(self, name: str) -> dict[str, str]:
        return {**self.namespaces.get(name, {}), "kubernetes.io/metadata.name": name}

    def allowed(self, src: Endpoint, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
        """True when both the source's egress and the destination's ingress allow it."""
        if isinstance(src, Pod) and not self._side(src, dst, port, protocol, "Egress"):
            return False
        return not (isinstance(dst, Pod) and not self._side(dst, src, port, protocol, "Ingress"))

    def egress_allowed(self, src: Pod, dst: Endpoint, port: int, protocol: str = "TCP") -> bool:
        """The source side alone (the destination's ingress rules not consulted)."""
        return self._side(src, dst, port, protocol, "Egress")

    def _side(self, pod: Pod, peer: Endpoint, port: int, protocol: str, kind: str) -> bool:
        selecting = [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == pod.namespace
            and kind in _policy_types(p)
            and _matches(p["spec"].get("podSelector") or {}, pod.labels)
        ]
        if not selecting:
            return True  # not isolated in this direction
        key = "egress" if kind == "Egress" else "ingress"
        peer_key = "to" if kind == "Egress" else "from"
        for policy in selecting:
            for rule in policy["spec"].get(key) or []:
                if not _port_ok(rule.get("ports"), port, protocol):
                    continue
                peers = rule.get(peer_key)
                if not peers or any(self._peer_ok(pr, peer, pod.namespace) for pr in peers):
                    return True
        return False

    def _peer_ok(self, peer_rule: Mapping[str, Any], peer: Endpoint, policy_ns: str) -> bool:
        if "ipBlock" in peer_rule:
            if not isinstance(peer, External):
                return False
            block = peer_rule["ipBlock"]
            ip = ipaddress.ip_address(peer.ip)
            net = ipaddress.ip_network(block["cidr"])
            if ip.version != net.version or ip not in net:
                return False
            return not any(
                ip in ipaddress.ip_network(ex)
                for ex in block.get("except", [])
                if ipaddress.ip_network(ex).version == ip.version
            )
        if not isinstance(peer, Pod):
            return False
        ns_sel = peer_rule.get("namespaceSelector")
        pod_sel = peer_rule.get("podSelector")
        if ns_sel is None:
            ns_ok = peer.namespace == policy_ns
        else:
            ns_ok = _matches(ns_sel, self.ns_labels(peer.namespace))
        return ns_ok and (pod_sel is None or _matches(pod_sel, peer.labels))


def _policy_types(policy: Mapping[str, Any]) -> Sequence[str]:
    types = policy["spec"].get("policyTypes")
    if types:
        return list(types)
    return ["Ingress", "Egress"] if policy["spec"].get("egress") else ["Ingress"]


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if selector.get("matchExpressions"):
        raise NotImplementedError("matchExpressions: extend the evaluator before using them")
    return all(
        labels.get(key) == value for key, value in (selector.get("matchLabels") or {}).items()
    )


def _port_ok(ports: Sequence[Mapping[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for spec in ports:
        if spec.get("protocol", "TCP") != protocol:
            continue
        if "port" not in spec:
            return True
        if not isinstance(spec["port"], int):
            raise NotImplementedError("named ports: extend the evaluator before using them")
        end = spec.get("endPort", spec["port"])
        if spec["port"] <= port <= end:
            return True
    return False
