"""Where a batch's time goes inside the server (in process): the split per event adds up, and
catching up from the match log delivers exactly the messages a live listener received."""

from __future__ import annotations

import pytest

from hotjoin.ops.bench import serve_path


def test_the_time_per_event_is_split_into_its_parts(capsys: pytest.CaptureFixture[str]) -> None:
    out = serve_path.run(subscriptions=300, stored=300, events=200, batch=100)
    assert out["events"] == 200 and out["batch"] == 100 and out["subscriptions"] == 300
    assert out["engine_path"] == "publish_batch"
    for k in ("decode_us", "engine_us", "reference_engine_alone_us"):
        assert out[k] > 0, k
    assert out["server_events_per_s"] > 0 and out["reference_events_per_s"] > 0
    assert out["server_events_per_s"] == pytest.approx(
        1e6 / (out["decode_us"] + out["engine_us"] + out["server_rest_us"]), rel=0.05)
    assert str(out["events"]) in capsys.readouterr().out


@pytest.mark.parametrize(("kind", "delivery"), [("select", "affected"), ("band", "pairs")])
def test_catching_up_delivers_what_a_live_listener_received(kind: str, delivery: str) -> None:
    out = serve_path.catch_up(kind, delivery, subscriptions=300, stored=300, events=300,
                              affected=5.0, batch=100)
    assert out["messages"] > 0
    assert (out["caught_up_messages"], out["caught_up_pairs"]) == (out["messages"], out["pairs"])
    assert (out["pairs"] > 0) == (delivery == "pairs")
    assert out["live_messages_per_cpu_s"] > 0 and out["catch_up_messages_per_cpu_s"] > 0
