"""Cost per million tokens from throughput and an hourly price."""

from __future__ import annotations

import math

import pytest

from attnswitch.observe.cost import (
    DEFAULT_HOURLY_USD,
    DEVICE_PATTERNS,
    ENV_PRICE,
    cost,
    device_key,
    hourly_price,
    usd_per_million_tokens,
)


@pytest.fixture(autouse=True)
def no_env_price(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_PRICE, raising=False)


@pytest.mark.parametrize(
    ("tokens_per_s", "hourly_usd", "usd"),
    [
        (1000.0, 3.60, 1.00),  # a million tokens in 1000 s: 1/3.6 hour at $3.60
        (250.0, 0.90, 1.00),  # 4000 s: 10/9 hour at $0.90
        (1e6 / 3600, 2.00, 2.00),  # exactly one hour
        (1e6, 36.0, 0.01),  # one second of a $36/h device
        (4156.0, 0.0, 0.0),  # a free device costs nothing at any rate
    ],
)
def test_worked_examples(tokens_per_s: float, hourly_usd: float, usd: float) -> None:
    assert math.isclose(usd_per_million_tokens(tokens_per_s, hourly_usd), usd, rel_tol=1e-12)


@pytest.mark.parametrize(
    ("tokens_per_s", "hourly_usd", "message"),
    [
        (0, 1.0, "tokens_per_s: expected > 0, got 0"),
        (-5, 1.0, "tokens_per_s: expected > 0"),
        (float("nan"), 1.0, "tokens_per_s: expected > 0"),
        (10, -1.0, "hourly_usd: expected >= 0"),
    ],
)
def test_bad_numbers(tokens_per_s: float, hourly_usd: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        usd_per_million_tokens(tokens_per_s, hourly_usd)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H200", "nvidia-h200"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100"),
        ("NVIDIA A100-SXM4-80GB", "nvidia-a100"),
        ("NVIDIA A10G", "nvidia-a10g"),
        ("Tesla T4", "nvidia-t4"),
        ("NVIDIA L4", "nvidia-l4"),
        ("NVIDIA L40S", None),
        ("TPU v4", "tpu-v4"),
        ("TPU v5 lite", "tpu-v5e"),
        ("TPU v5e", "tpu-v5e"),
        ("TPU v5p", "tpu-v5p"),
        ("TPU v6 lite", "tpu-v6e"),
        ("cpu", "cpu"),
        ("nvidia-h100", "nvidia-h100"),
        ("Quantum Abacus 9000", None),
    ],
)
def test_device_names_map_to_price_keys(name: str, key: str | None) -> None:
    assert device_key(name) == key


def test_every_pattern_has_a_default_price() -> None:
    assert {key for key, _ in DEVICE_PATTERNS} == set(DEFAULT_HOURLY_USD)
    assert all(device_key(key) == key for key in DEFAULT_HOURLY_USD)


def test_price_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {"nvidia-h200": 2.5}
    assert hourly_price("NVIDIA H200") == (DEFAULT_HOURLY_USD["nvidia-h200"], "default")
    assert hourly_price("NVIDIA H200", prices=table) == (2.5, "prices")
    assert hourly_price("NVIDIA H200", prices={"NVIDIA H200": 2.0}) == (2.0, "prices")
    monkeypatch.setenv(ENV_PRICE, "1.75")
    assert hourly_price("NVIDIA H200", prices=table) == (1.75, "environment")
    assert hourly_price("NVIDIA H200", hourly_usd=9.0, prices=table) == (9.0, "argument")
    assert hourly_price("Quantum Abacus 9000") == (1.75, "environment")


def test_unknown_device_or_bad_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=f"pass hourly_usd or set {ENV_PRICE}"):
        hourly_price("Quantum Abacus 9000")
    with pytest.raises(ValueError, match="device: expected a device name"):
        hourly_price(None)
    monkeypatch.setenv(ENV_PRICE, "cheap")
    with pytest.raises(ValueError, match=f"{ENV_PRICE}: expected a number"):
        hourly_price("cpu")


def test_cost_of_a_measured_run() -> None:
    result = cost(tokens=2_000_000, seconds=500.0, device="TPU v5 lite")
    assert result.tokens_per_s == 4000.0
    assert result.hourly_usd == DEFAULT_HOURLY_USD["tpu-v5e"]
    assert result.price_source == "default" and result.device == "TPU v5 lite"
    # 4000 tokens/s: a million in 250 s, 250/3600 hour at $1.20 = $1/12
    assert result.hourly_usd == 1.20
    assert math.isclose(result.usd_per_million_tokens, 1 / 12, rel_tol=1e-12)
    with pytest.raises(ValueError, match="seconds: expected > 0"):
        cost(tokens=10, seconds=0.0, hourly_usd=1.0)
