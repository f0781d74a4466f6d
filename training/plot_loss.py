"""Plot a pre-training run's loss and accuracy curves from MODEL_DIR/metrics.jsonl.

    python training/plot_loss.py runs/pretrain_mini_wiki training/results/pretrain_mini_wiki_loss.png

Left: total, MLM and NSP loss per logged step (phase 2 shaded). Right: MLM and
NSP training accuracy, with the held-out values and trivial baselines of
MODEL_DIR/eval.json as markers when present.
"""

import json
import os
import sys


def main(model_dir, out_png):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(model_dir, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if not rows:
        raise SystemExit(f"{model_dir}/metrics.jsonl holds no logged step")
    steps = [r["step"] for r in rows]
    phase2 = [r["step"] for r in rows if r["phase"] == 2]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, label in (("loss", "total"), ("mlm_loss", "MLM"), ("nsp_loss", "NSP")):
        ax1.plot(steps, [r[key] for r in rows], label=label)
    for key, label in (("mlm_accuracy", "MLM (train)"), ("nsp_accuracy", "NSP (train)")):
        ax2.plot(steps, [r[key] for r in rows], label=label)
    eval_path = os.path.join(model_dir, "eval.json")
    if os.path.exists(eval_path):
        with open(eval_path, encoding="utf-8") as f:
            evals = json.load(f)
        for name, e in sorted(evals.items()):
            ax2.scatter([e["step"]], [e["mlm_accuracy"]], marker="o", color="C0", zorder=3)
            ax2.scatter([e["step"]], [e["nsp_accuracy"]], marker="o", color="C1", zorder=3)
            ax2.scatter([e["step"]], [e["baseline_mlm_accuracy"]], marker="x", color="C0", zorder=3)
        ax2.scatter([], [], marker="o", color="gray", label="held-out")
        ax2.scatter([], [], marker="x", color="gray", label="most-frequent-token baseline")
        ax2.axhline(0.5, color="C1", linestyle=":", linewidth=1, label="NSP chance")
    for ax in (ax1, ax2):
        if phase2:
            ax.axvspan(min(phase2) - (phase2[0] - steps[steps.index(phase2[0]) - 1] if len(steps) > len(phase2)
                                      else 0), max(phase2), color="gray", alpha=0.15, label="phase 2 (512)")
        ax.set_xlabel("optimiser step")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    ax1.set_ylabel("loss")
    ax2.set_ylabel("accuracy")
    ax1.set_title(f"pre-training loss ({os.path.basename(os.path.normpath(model_dir))})")
    ax2.set_title("masked-LM and next-sentence accuracy")
    fig.tight_layout()
    os.makedirs(os.path.dirname(out_png) or ".", exist_ok=True)
    fig.savefig(out_png, dpi=110)
    print(out_png)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
