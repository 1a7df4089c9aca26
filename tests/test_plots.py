import math

import pytest

from searchgym.agents.train.metrics_log import MetricsLog
from searchgym.cli import main
from searchgym.plots import plot_training_curves


def write_run(run_dir, steps: int = 40) -> None:
    with MetricsLog(run_dir, tensorboard=False) as log:
        for step in range(1, steps + 1):
            log.log(
                step,
                {
                    "reward/total": step / steps + 0.1 * math.sin(step),
                    "reward/outcome": step / steps,
                    "loss/policy": 1 / step,
                    "loss/kl": float("nan") if step == 3 else 0.01 * step,
                    "rollout/searches": 2 - step / steps,
                    "rollout/response_tokens": 100.0 + step,
                    "rollout/degenerate_groups": 0.2,
                    "time/step_s": 1.5,
                },
            )
            if step % 10 == 0:
                log.log(step, {"eval/em": step / 100})


def test_plot_command_writes_one_png_per_namespace(tmp_path, capsys):
    write_run(tmp_path)
    assert main(["plot", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    expected = [tmp_path / "plots" / f"{ns}.png" for ns in ("reward", "loss", "rollout", "eval", "time")]
    assert printed == [str(p) for p in expected]
    for path in expected:
        data = path.read_bytes()
        assert data[:4] == b"\x89PNG" and len(data) > 5_000


def test_plot_to_another_folder_with_a_window(tmp_path, capsys):
    write_run(tmp_path / "run", steps=5)
    assert main(["plot", str(tmp_path / "run"), "--out", str(tmp_path / "figs"), "--window", "3"]) == 0
    assert len(list((tmp_path / "figs").glob("*.png"))) == 4  # no eval rows in 5 steps


def test_plot_without_metrics_is_a_clear_error(tmp_path, capsys):
    assert main(["plot", str(tmp_path)]) == 2
    assert "no metrics.jsonl in" in capsys.readouterr().err
    (tmp_path / "metrics.jsonl").write_text("")
    assert main(["plot", str(tmp_path)]) == 2
    assert "holds no metrics yet" in capsys.readouterr().err


def test_curves_skip_non_finite_values(tmp_path):
    rows = [{"step": 1, "loss/kl": math.nan}, {"step": 2, "loss/kl": 0.5}, {"step": 3, "loss/kl": 0.25}]
    assert plot_training_curves(rows, tmp_path) == [tmp_path / "loss.png"]
    with pytest.raises(ValueError, match="window must be a positive"):
        plot_training_curves(rows, tmp_path, window=0)


def test_an_interval_is_a_band_on_its_metric_not_panels_of_its_own(tmp_path):
    import matplotlib.image

    rows = [{"step": s, "eval/em": 0.4, "eval/em_low": 0.3, "eval/em_high": 0.5} for s in (0, 5)]
    [path] = plot_training_curves(rows, tmp_path)
    one_panel = matplotlib.image.imread(path).shape[1]
    rows = [{**row, "eval/em_lower": 0.2} for row in rows]  # not an interval: a panel of its own
    [path] = plot_training_curves(rows, tmp_path / "two")
    assert matplotlib.image.imread(path).shape[1] > 1.8 * one_panel
