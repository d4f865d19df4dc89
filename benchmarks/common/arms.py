"""Arm names of the experiments that train several arms from one start.

An arm is a protocol name (``sage``, ``azr``, ``rlvr``, ``mae``), optionally with the
frozen-pool suffix (``azr:frozen``) and a named training setting (``rlvr@bf16``, whose flags
:attr:`benchmarks.learning_curve.run.CurveConfig.variants` holds).
"""

from __future__ import annotations

FROZEN_POOL = ":frozen"
"""Suffix of an arm that trains under the frozen-pool ablation (``azr:frozen``:
``EnvConfig.pool_admission = "frozen"``; docs/reference/rewards.md, "Frozen pool")."""


VARIANT = "@"
"""Separator of an arm's named training setting (``rlvr@bf16``:
:attr:`benchmarks.learning_curve.run.CurveConfig.variants`)."""


def split_variant(arm: str) -> tuple[str, str | None]:
    """``("rlvr", "bf16")`` for ``"rlvr@bf16"``, ``("azr:frozen", None)`` for ``"azr:frozen"``."""
    base, sep, variant = arm.partition(VARIANT)
    return base, (variant if sep else None)


def split_arm(arm: str) -> tuple[str, bool]:
    """``("azr", True)`` for ``"azr:frozen"`` (and ``"azr:frozen@bf16"``), ``("azr", False)``
    for ``"azr"``."""
    arm = split_variant(arm)[0]
    if arm.endswith(FROZEN_POOL):
        return arm[: -len(FROZEN_POOL)], True
    return arm, False


def parse_curve_arms(spec: str, variants: dict[str, list[str]] | None = None) -> list[str]:
    """Arm names from ``"sage,sage:frozen,azr,rlvr,rlvr@bf16"``, checked against the protocol
    registry and ``variants``
    (:meth:`benchmarks.learning_curve.run.CurveConfig.parsed_variants`).

    Raises:
        ValueError: on an empty or repeated arm, an unknown protocol or variant, or
            ``rlvr:frozen`` (RLVR proposes nothing: its pool never grows).
    """
    from learners.training.compare import parse_arms

    names = [a.strip() for a in spec.split(",") if a.strip()]
    if len(set(names)) != len(names):
        raise ValueError(f"--protocols repeats an arm: {names}")
    plain = [split_arm(n)[0] for n in names]
    parse_arms(",".join(dict.fromkeys(plain)))  # unknown protocols, empty list
    for name, protocol in zip(names, plain):
        if split_variant(name)[0].endswith(FROZEN_POOL) and protocol == "rlvr":
            raise ValueError("rlvr:frozen is rlvr: its pool never grows")
        variant = split_variant(name)[1]
        if variant is not None and variant not in (variants or {}):
            raise ValueError(
                f"arm {name!r} names variant {variant!r}, not in --variants "
                f"({sorted(variants or {})})"
            )
    return names
