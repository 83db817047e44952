"""The module-level commands keep the signatures they had before the API became a client:
``ckpt.push/latest/pull/promote/list_checkpoints/prune/log_pointer`` are a contract, so each
is compared with its text as it was (``inspect.signature``), parameter by parameter, order,
kind, annotation and default included."""

from __future__ import annotations

import inspect

import pytest

import ckpt_action as ckpt

_HUB = "endpoint: 'str | None' = None, token: 'str | None' = None, timeout: 'float | None' = None, " \
       "retries: 'int | None' = None, auth: 'str | None' = None"
_SIGN = ("signing_key: 'PathLike | None' = None, signing_certificate: 'PathLike | None' = None, "
         "signing_chain: 'PathLike | Sequence[PathLike] | None' = None, sign_keyless: 'bool' = False, "
         "sigstore_trust_config: 'PathLike | None' = None")
_VERIFY = ("verify_key: 'PathLike | None' = None, verify_certificate_chain: 'PathLike | None' = None, "
           "verify_identity: 'str | None' = None, verify_issuer: 'str | None' = None, "
           "sigstore_trust_config: 'PathLike | None' = None, verify_min_step: 'int | None' = None, "
           "verify_require_provenance: 'bool' = False")

BEFORE = {
    "push": "(local_dir: 'PathLike', repo: 'str', *, step: 'int | None' = None, subfolder: 'str | None' = None, "
            "private: 'bool' = True, commit_message: 'str | None' = None, " + _SIGN + ", distributed: 'bool' = False, "
            "group: 'Any' = None, " + _HUB + ", metrics: 'Mapping[str, float] | None' = None, card: 'bool' = False)"
            " -> 'CheckpointHandle'",
    "latest": "(repo: 'str', *, revision: 'str | None' = None, require: 'bool' = False, " + _VERIFY + ", " + _HUB
              + ", best: 'str | None' = None) -> 'CheckpointHandle | None'",
    "pull": "(source: 'CheckpointHandle | str | None' = None, local_dir: 'PathLike | None' = None, *, "
            "subfolder: 'str | None' = None, revision: 'str | None' = None, force: 'bool' = False, "
            "include: 'Sequence[str]' = (), exclude: 'Sequence[str]' = (), cache_dir: 'PathLike | None' = None, "
            "pointer: 'PathLike | Mapping[str, Any] | None' = None, from_wandb: 'str | None' = None, " + _VERIFY
            + ", " + _HUB + ", found: 'LatestResult | None' = None) -> 'Path'",
    "promote": "(source: 'CheckpointHandle | str', to: 'str', *, subfolder: 'str | None' = None, "
               "revision: 'str | None' = None, to_repo: 'str | None' = None, tag: 'str | None' = None, "
               "branch: 'str | None' = None, " + _SIGN + ", " + _HUB + ", best: 'str | None' = None, "
               "card: 'bool' = False, as_model: 'bool' = False, max_shard_size: 'int | str | None' = None, "
               "strip_prefix: 'str | None' = None) -> 'CheckpointHandle'",
    "list_checkpoints": "(repo: 'str', *, revision: 'str | None' = None, " + _HUB + ") -> 'list[CheckpointInfo]'",
    "prune": "(repo: 'str', keep_last: 'int', *, dry_run: 'bool' = False, free_storage: 'bool' = False, " + _HUB
             + ", keep_every: 'int | None' = None, keep_best: 'str | None' = None, card: 'bool' = False)"
               " -> 'PruneResult'",
    "log_pointer": "(handle: 'CheckpointHandle', run: 'Any' = None, *, artifact_name: 'str | None' = None, "
                   "extra: 'dict[str, Any] | None' = None, project: 'str | None' = None, "
                   "entity: 'str | None' = None, run_id: 'str | None' = None, registry: 'str | None' = None, "
                   "warn: 'Warn | None' = None) -> 'PointerResult'",
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_the_module_level_command_keeps_its_signature(name: str) -> None:
    assert str(inspect.signature(getattr(ckpt, name))) == BEFORE[name]


# What a method takes that its function does not offer (the doors' own hooks).
CLIENT_ONLY = {"push": {"join_job", "note"}, "latest": {"warn"}, "pull": {"latest", "warn"}, "promote": {"warn"},
               "list": {"warn", "tags"}, "prune": set(), "log_pointer": set()}
METHOD = {"list_checkpoints": "list"}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_each_function_takes_its_client_methods_parameters_plus_the_connection(name: str) -> None:
    """A function is its method's parameters, each option group spelled as its fields, plus the
    connection keywords (``Connection``'s fields) that make its client: nothing re-declared
    that the method does not take, nothing the method takes left out."""
    from dataclasses import fields

    from ckpt_action.api import CONNECTION, GROUPS
    from ckpt_action.client import Client

    method = METHOD.get(name, name)
    expected: set[str] = set()
    for param in list(inspect.signature(getattr(Client, method)).parameters)[1:]:
        if param in GROUPS:
            expected |= {f.name for f in fields(GROUPS[param])}
        elif param not in CLIENT_ONLY[method]:
            expected.add(param)
    if method != "log_pointer":  # W&B's connection is its own
        expected |= set(CONNECTION)
    assert set(inspect.signature(getattr(ckpt, name)).parameters) == expected
