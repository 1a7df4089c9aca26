import importlib.util
import json
import math
import sys
import types

import pytest

from searchgym.agents.train.metrics_log import METRICS_FILE, MetricsLog, read_metrics
from searchgym.errors import ConfigError, DataNotFoundError, DependencyNotInstalled

HAS_TENSORBOARD = importlib.util.find_spec("tensorboard") is not None


class FakeWriter:
    """Records what MetricsLog hands to torch's SummaryWriter."""

    instances: list["FakeWriter"] = []

    def __init__(self, logdir, purge_step=None):
        self.logdir, self.purge_step, self.scalars, self.closed = logdir, purge_step, [], False
        FakeWriter.instances.append(self)

    def add_scalar(self, name, value, step):
        self.scalars.append((name, value, step))

    def flush(self):
        pass

    def close(self):
        self.closed = True


@pytest.fixture
def fake_tensorboard(monkeypatch):
    FakeWriter.instances = []
    module = types.ModuleType("torch.utils.tensorboard")
    module.SummaryWriter = FakeWriter
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", module)
    return FakeWriter.instances


@pytest.fixture
def no_tensorboard(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import raises ImportError


def test_each_log_call_is_one_flushed_json_line(tmp_path):
    with MetricsLog(tmp_path, tensorboard=False) as log:
        log.log(1, {"reward/total": 0.25, "loss/policy": 1.5})
        # readable while the run goes on: the line is flushed, not buffered until close
        assert json.loads((tmp_path / METRICS_FILE).read_text()) == {
            "step": 1,
            "reward/total": 0.25,
            "loss/policy": 1.5,
        }
        log.log(1, {"eval/em": 0.5})  # an evaluation at the same step
        log.log(2, {"reward/total": float("nan"), "rollout/searches": 2})
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 1, 2]
    assert rows[1] == {"step": 1, "eval/em": 0.5}
    assert math.isnan(rows[2]["reward/total"]) and rows[2]["rollout/searches"] == 2.0
    assert "NaN" not in (tmp_path / METRICS_FILE).read_text()  # JSON has no NaN: null


def test_resume_truncates_the_steps_it_will_repeat(tmp_path):
    with MetricsLog(tmp_path, tensorboard=False) as log:
        for step in range(1, 7):
            log.log(step, {"reward/total": step / 10})
    with MetricsLog(tmp_path, tensorboard=False) as log:  # killed after 6, resumed from checkpoint 4
        with pytest.raises(ConfigError, match=r"truncate_after\(4\)"):
            log.log(5, {"reward/total": 0.0})
        log.truncate_after(4)
        log.log(5, {"reward/total": 0.55})
        log.log(6, {"reward/total": 0.66})
    rows = read_metrics(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r["reward/total"] for r in rows][-2:] == [0.55, 0.66]


def test_a_line_cut_short_by_a_crash_is_dropped(tmp_path):
    path = tmp_path / METRICS_FILE
    path.write_text('{"step": 1, "loss/policy": 0.5}\n{"step": 2, "loss/po')
    assert read_metrics(tmp_path) == [{"step": 1, "loss/policy": 0.5}]
    with MetricsLog(tmp_path, tensorboard=False) as log:
        log.log(2, {"loss/policy": 0.25})
    assert read_metrics(tmp_path) == [{"step": 1, "loss/policy": 0.5}, {"step": 2, "loss/policy": 0.25}]
    path.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ConfigError, match=f"{METRICS_FILE}:2: not a JSON line"):
        read_metrics(tmp_path)


@pytest.mark.parametrize(
    ("step", "metrics", "message"),
    [
        (1, {"reward": 1.0}, "must look like 'namespace/name'"),
        (1, {"reward/em": "high"}, "must be a number"),
        (-1, {"reward/em": 1.0}, "non-negative integer"),
        (1.5, {"reward/em": 1.0}, "non-negative integer"),
    ],
)
def test_bad_metrics_are_refused(tmp_path, step, metrics, message):
    with MetricsLog(tmp_path, tensorboard=False) as log, pytest.raises(ConfigError, match=message):
        log.log(step, metrics)


def test_closed_log_refuses_and_close_twice_is_fine(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    log.close()
    log.close()
    with pytest.raises(ConfigError, match="is closed"):
        log.log(1, {"loss/policy": 1.0})


def test_read_metrics_names_what_is_missing(tmp_path):
    with pytest.raises(DataNotFoundError, match="no metrics.jsonl in .*searchgym train"):
        read_metrics(tmp_path)


def test_tensorboard_gets_the_same_scalars_and_forgets_truncated_steps(tmp_path, fake_tensorboard):
    with MetricsLog(tmp_path) as log:  # None: used because it is importable
        assert log.tensorboard
        log.log(1, {"reward/total": 0.5, "loss/policy": float("nan")})
        log.log(2, {"reward/total": 0.75})
        log.truncate_after(1)
        log.log(2, {"reward/total": 0.8})
    first, resumed = fake_tensorboard
    assert first.logdir == str(tmp_path / "tensorboard") and first.closed
    assert first.scalars[0] == ("reward/total", 0.5, 1) and math.isnan(first.scalars[1][1])
    assert resumed.purge_step == 2 and resumed.scalars == [("reward/total", 0.8, 2)] and resumed.closed


def test_tensorboard_is_optional_unless_required(tmp_path, no_tensorboard):
    with MetricsLog(tmp_path) as log:
        assert not log.tensorboard
        log.log(1, {"reward/total": 1.0})
    with pytest.raises(DependencyNotInstalled, match=r"pip install 'searchgym\[tensorboard\]'"):
        MetricsLog(tmp_path, tensorboard=True)


@pytest.mark.skipif(not HAS_TENSORBOARD, reason="tensorboard is not installed (the tensorboard extra)")
def test_real_tensorboard_event_files(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with MetricsLog(tmp_path, tensorboard=True) as log:
        for step in range(1, 4):
            log.log(step, {"reward/total": step / 4})
    with MetricsLog(tmp_path, tensorboard=True) as log:  # resumed from step 2
        log.truncate_after(2)
        log.log(3, {"reward/total": 1.0})
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/total")] == [(1, 0.25), (2, 0.5), (3, 1.0)]
