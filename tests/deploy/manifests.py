"""Offline checks for Kubernetes manifests: strict model validation and a small
NetworkPolicy evaluator.

The evaluator implements the parts of the NetworkPolicy semantics the manifests
use (podSelector/namespaceSelector with matchLabels, ipBlock with except, ports
with protocol and endPort), so the tests can ask the question the issue asks
("may a sandbox pod reach X on port P?") instead of pattern-matching YAML.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import pydantic
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


def validation_errors(doc: Mapping[str, Any]) -> list[str]:
    """Why ``doc`` does not deserialise into its model ([] when it does).

    Unknown fields and missing required fields are both errors, at any depth.
    """
    cls = model_class(doc)
    if not hasattr(cls, "model_validate"):
        raise RuntimeError(
            "strict validation needs the pydantic-based kubernetes client models "
            f"(kubernetes>=37); {cls.__name__} is an older generated model"
        )
    try:
        cls.model_validate(dict(doc))
    except pydantic.ValidationError as exc:
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    return []


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
