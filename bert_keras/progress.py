"""Progress that fits where it goes: Keras' bar on a terminal, plain lines in a log.

Keras' progress bar redraws itself with carriage returns and bold escape codes; written
to a file (``make demo > log.txt``, a scheduler's log) that is one 300-character line of
control codes per batch.  When the stream is not a terminal, the same progress is printed
as plain lines instead, at most one every ``every`` seconds (and once at the end)::

    epoch 1/3: step 120/400, loss 0.4123, 38.2 steps/s, ETA 0:00:07
    1,024/100,000 texts, 812.3 texts/s, ETA 0:02:01

`Progress` stands in for `keras.utils.Progbar` (``update``/``add``), and `fit_progress`
turns the ``verbose`` a caller would hand to ``model.fit`` into the verbosity and callback
that do this for a training run.
"""

from __future__ import annotations

import sys
import time

PLAIN_EVERY_SECONDS = 10.0


def is_terminal(stream=None) -> bool:
    """Whether ``stream`` (default stdout) is a terminal, where a redrawn bar reads well."""
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _clock(seconds) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _values(values) -> str:
    parts = []
    for name, value in values or ():
        parts.append(f"{name} {value:.4f}" if isinstance(value, float) else f"{name} {value}")
    return "".join(", " + p for p in parts)


class Progress:
    """`keras.utils.Progbar` on a terminal; elsewhere a plain line every ``every`` seconds.

    Args:
      target: the count at the end (None: unknown).
      unit_name: what is counted ("step", "line").
      stream: where the lines go (default stdout).
      every: seconds between plain lines.
      prefix: put before each plain line (e.g. "phase 1: ").
      stateful_metrics: passed to Keras' bar (values shown as given, not averaged).
      verbose: 0 prints nothing.
    """

    def __init__(self, target, unit_name="step", stream=None, every=PLAIN_EVERY_SECONDS, prefix="",
                 stateful_metrics=None, verbose=1):
        self.target, self.unit, self.every, self.prefix = target, unit_name, every, prefix
        self.stream, self.verbose = stream, verbose
        self.current, self._start, self._last = 0, time.monotonic(), None
        self._bar = None
        # Keras' bar draws on stdout: only where stdout is what was asked for (evaluate's stdout is JSON)
        if verbose and self.stream in (None, sys.stdout) and is_terminal(sys.stdout):
            import keras

            self._bar = keras.utils.Progbar(target, unit_name=unit_name, stateful_metrics=stateful_metrics)

    def update(self, current, values=None, finalize=None):
        self.current = current
        if not self.verbose:
            return
        if self._bar is not None:
            self._bar.update(current, values=values, finalize=finalize)
            return
        now = time.monotonic()
        done = finalize if finalize is not None else (self.target is not None and current >= self.target)
        if not done and self._last is not None and now - self._last < self.every:
            return
        if self._last is None and not done and now - self._start < self.every:
            return  # a short run gets only its last line
        self._last = now
        print(self.line(current, values, now - self._start), file=self.stream or sys.stdout, flush=True)

    def add(self, n, values=None):
        self.update(self.current + n, values=values)

    def line(self, current, values, elapsed) -> str:
        rate = current / elapsed if elapsed > 0 else 0.0
        count = f"{current:,}" if self.target is None else f"{current:,}/{self.target:,}"
        eta = ""
        if self.target is not None and rate > 0 and current < self.target:
            eta = f", ETA {_clock((self.target - current) / rate)}"
        return f"{self.prefix}{count} {self.unit}s{_values(values)}, {rate:,.1f} {self.unit}s/s{eta}"


def _fit_callback_class():
    import keras

    class PlainProgress(keras.callbacks.Callback):
        """``model.fit``'s progress as plain lines (see the module docstring)."""

        def __init__(self, stream=None, every=PLAIN_EVERY_SECONDS):
            super().__init__()
            self.stream, self.every = stream, every

        def on_epoch_begin(self, epoch, logs=None):
            steps = self.params.get("steps") if self.params else None
            epochs = self.params.get("epochs") if self.params else None
            self.progress = Progress(steps, "step", self.stream, self.every,
                                     prefix=f"epoch {epoch + 1}/{epochs}: " if epochs else f"epoch {epoch + 1}: ")

        def on_train_batch_end(self, batch, logs=None):
            self.progress.update(batch + 1, _loss(logs), finalize=False)

        def on_epoch_end(self, epoch, logs=None):
            values = [(k, float(v)) for k, v in (logs or {}).items() if _number(v)]
            self.progress.update(self.progress.current, values, finalize=True)

    return PlainProgress


def _number(value) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def _loss(logs):
    return [("loss", float(logs["loss"]))] if logs and "loss" in logs and _number(logs["loss"]) else None


def plain_progress_callback(stream=None, every=PLAIN_EVERY_SECONDS):
    """A Keras callback printing ``fit``'s progress as plain lines."""
    return _fit_callback_class()(stream=stream, every=every)


def fit_progress(verbose, stream=None):
    """(verbose for ``model.fit``, extra callbacks): Keras' bar (``verbose=1``) on a terminal,
    plain lines elsewhere.  Other ``verbose`` values (0, 2) are kept as given."""
    if verbose == 1 and not is_terminal(stream):
        return 0, [plain_progress_callback(stream)]
    return verbose, []
