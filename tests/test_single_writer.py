"""One writer per output, temporaries of killed writers removed, a full disk named, Ctrl-C after the end.

Every command that writes a file or folder holds an exclusive lock beside it for its
whole run (`bert_keras.locks.single_writer`).  Each check here runs a real command
against an output that a second, live process is writing (it holds the lock, as a
running `bert-keras` command does) and asserts the one-line refusal and that the
output is untouched; two real TFLite exports race for one folder; a real export is
killed with SIGKILL half-way and the next run cleans up after it.
"""

import glob
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

tf = pytest.importorskip("tensorflow")

from bert_keras.errors import BertKerasError  # noqa: E402
from bert_keras.locks import lock_file_of, single_writer  # noqa: E402
from tests.test_data_safety import LABELS, TEXTS, _tree  # noqa: E402
from tests.test_data_safety import cli, clf_dir, vocab_file  # noqa: E402,F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


class Holder:
    """Another live process writing ``path``: it holds the lock until `release`."""

    def __init__(self, path):
        code = textwrap.dedent(f"""
            import sys
            from bert_keras.locks import single_writer
            with single_writer({os.fspath(path)!r}):
                print("held", flush=True)
                sys.stdin.read()
        """)
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=ENV)
        assert self.process.stdout.readline().strip() == "held"

    def release(self):
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


def _train_csv(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(TEXTS, LABELS)))
    return str(path)


def _commands(tmp_path, clf_dir, vocab_file):
    """name -> (the output it writes, its arguments)."""
    train = _train_csv(tmp_path)
    texts = tmp_path / "texts.txt"
    texts.write_text("a good film\nawful and dull\n")
    out = str(tmp_path / "out")
    return {
        "export saved_model": (out, ["export", "--model-dir", clf_dir, "--out", out]),
        "export tflite": (out, ["export", "--model-dir", clf_dir, "--out", out, "--format", "tflite"]),
        "export tfhub": (out, ["export", "--model-dir", clf_dir, "--out", out, "--format", "tfhub"]),
        "finetune": (out, ["finetune", "--task", "classification", "--init", clf_dir, "--train", train,
                           "--model-dir", out, "--epochs", "1", "--batch-size", "4", "--max-seq-len", "16"]),
        "convert": (out, ["convert", "--from", clf_dir, "--to", out]),
        "vocab": (out, ["vocab", "--input", train, "--out", out, "--size", "20", "--min-count", "1"]),
        "predict --output": (out, ["predict", "--model", clf_dir, "--input", str(texts), "--output", out]),
        "evaluate --output": (out, ["evaluate", "--model-dir", clf_dir, "--eval", train, "--output", out]),
        "pretrain": (out, ["pretrain", "--preset", "tiny", "--vocab", vocab_file, "--train-files", train,
                           "--model-dir", out, "--phase1-steps", "1", "--phase2-steps", "0", "--batch-size", "2",
                           "--phase1-seq-len", "16", "--phase1-max-predictions", "3", "--strategy", "cpu", "--no-progress"]),
    }


@pytest.mark.parametrize("command", ["export saved_model", "export tflite", "export tfhub", "finetune", "convert",
                                     "vocab", "predict --output", "evaluate --output", "pretrain"])
def test_a_second_writer_is_refused_in_one_line_naming_the_first(tmp_path, clf_dir, vocab_file, cli, command):
    out, args = _commands(tmp_path, clf_dir, vocab_file)[command]
    holder = Holder(out)
    try:
        result = cli(*args)
    finally:
        holder.release()
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"{out}: another bert-keras writer is writing it (pid {holder.process.pid}" in lines[0]
    assert not os.path.exists(out)  # the refused writer wrote nothing
    assert not os.path.exists(lock_file_of(out))  # and the holder's lock file went with it


def test_the_lock_is_released_on_exit_and_nests_in_one_process(tmp_path):
    out = tmp_path / "out"
    with single_writer(out):
        with single_writer(out):  # an export's folder is locked by the command and by atomic_folder
            assert os.path.exists(lock_file_of(out))
        assert json.loads(open(lock_file_of(out)).read())["pid"] == os.getpid()
    assert not os.path.exists(lock_file_of(out))
    holder = Holder(out)  # another process may take it now ...
    try:
        with pytest.raises(BertKerasError, match=f"pid {holder.process.pid}"):  # ... and then we may not
            with single_writer(out):
                pass
    finally:
        holder.release()


def test_a_pipe_output_is_written_to_never_replaced_or_locked(tmp_path, clf_dir, cli):
    import stat
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo, encoding="utf-8").read()), daemon=True)
    reader.start()
    result = cli("predict", "--model", clf_dir, "--output", fifo, "a good film")
    reader.join(timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(received[0])["label"] in ("neg", "pos")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the pipe: /dev/stdout and FIFOs are written to
    assert sorted(os.listdir(tmp_path)) == ["pipe"]  # no lock file, no temporary


def test_an_output_whose_folder_cannot_be_made_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")  # a file where the output's folder would be
    with pytest.raises(BertKerasError, match=rf"^{blocker}/out: cannot create its lock file "):
        with single_writer(blocker / "out"):
            pass


def test_a_killed_holder_leaves_nothing_that_blocks_the_next_writer(tmp_path):
    out = tmp_path / "out"
    holder = Holder(out)
    holder.process.kill()  # kill -9: the kernel drops the lock, the lock file stays
    holder.process.wait()
    assert os.path.exists(lock_file_of(out))
    with single_writer(out):
        pass
    assert not os.path.exists(lock_file_of(out))


def test_two_tflite_exports_into_one_folder_never_report_a_file_that_is_not_there(tmp_path, clf_dir):
    out = tmp_path / "tflite"
    runs = [subprocess.Popen([sys.executable, "-m", "bert_keras", "export", "--model-dir", clf_dir, "--out", str(out),
                              "--format", "tflite", "--quantize", quantize], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=ENV) for quantize in ("none", "float16")]
    results = [(run.wait(timeout=600), run.stdout.read(), run.stderr.read()) for run in runs]
    succeeded = 0
    for code, stdout, stderr in results:
        if code == 0:
            succeeded += 1
            paths = json.loads(stdout.strip().splitlines()[-1])
            for key in ("ids", "text"):
                assert os.path.isfile(paths[key]), (key, paths[key], os.listdir(out))
        else:  # the later one, refused while the first wrote
            assert code == 1 and "another bert-keras writer is writing it (pid " in stderr, stderr
    assert succeeded >= 1
    assert not glob.glob(str(tmp_path / ".tflite.*"))


def test_an_export_killed_half_way_leaves_temporaries_the_next_run_removes(tmp_path, clf_dir, cli):
    out = tmp_path / "serving"
    run = subprocess.Popen([sys.executable, "-m", "bert_keras", "export", "--model-dir", clf_dir, "--out", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    deadline = time.time() + 300
    while not glob.glob(str(tmp_path / ".serving.tmp-*")) and run.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    run.kill()
    run.wait()
    left = glob.glob(str(tmp_path / ".serving.tmp-*"))
    assert left and not out.exists()  # what kill -9 leaves: a half-written temporary, no export
    result = cli("export", "--model-dir", clf_dir, "--out", out)
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["serving"]  # temporaries and lock file gone
    assert os.path.isfile(out / "saved_model.pb")


def test_a_killed_writers_temporary_file_is_removed_by_the_next_predict(tmp_path, clf_dir, cli):
    stale = tmp_path / ".predictions.jsonl.tmp-k2x9q1"
    stale.write_text('{"label": "half-written"}\n')
    result = cli("predict", "--model", clf_dir, "--output", tmp_path / "predictions.jsonl", "a good film")
    assert result.returncode == 0, result.stderr
    assert sorted(os.listdir(tmp_path)) == ["predictions.jsonl"]


# --------------------------------------------------------------------------- a full disk
TF_DISK_FULL = ("{{function_node __wrapped__SaveV2_dtypes_12_device_/job:localhost/replica:0/task:0/device:CPU:0}} "
                "/srv/out/variables/variables_temp/part-00000-of-00001.data-00000-of-00001.tempstate1; "
                "No space left on device [Op:SaveV2]")


def test_a_full_disk_during_a_saved_model_export_names_the_folder_and_the_space(tmp_path, clf_dir, cli, monkeypatch):
    from bert_keras.export import saved_model

    out = tmp_path / "serving"
    assert cli("export", "--model-dir", clf_dir, "--out", out).returncode == 0
    before = _tree(out)

    def fill_the_disk(path, *args, **kwargs):
        os.makedirs(os.path.join(path, "variables"))
        with open(os.path.join(path, "variables", "variables.data-00000-of-00001"), "wb") as f:
            f.write(b"\0" * 100_000)
        raise tf.errors.ResourceExhaustedError(None, None, TF_DISK_FULL)

    monkeypatch.setattr(saved_model, "_write_archive", fill_the_disk)
    result = cli("export", "--model-dir", clf_dir, "--out", out)
    assert result.returncode == 1
    line, = result.stderr.strip().splitlines()
    assert line.startswith(f"bert-keras export: error: {out}: no space left on its device (it needs about ")
    assert " MB free in " in line and "SaveV2" not in line
    assert _tree(out) == before  # the previous export stays
    assert sorted(os.listdir(tmp_path)) == ["serving"]


def test_a_full_disk_during_a_tflite_export_names_the_folder_not_its_temporary(tmp_path, clf_dir, cli, monkeypatch):
    from bert_keras.export import tflite
    from bert_keras.writing import atomic_write

    def full(path, write):
        def partial(tmp):
            with open(tmp, "wb") as f:
                f.write(b"\0" * 50_000)
            raise OSError(28, "No space left on device")
        atomic_write(path, partial)

    monkeypatch.setattr(tflite, "atomic_write", full)
    out = tmp_path / "tflite"
    result = cli("export", "--model-dir", clf_dir, "--out", out, "--format", "tflite")
    assert result.returncode == 1
    line, = result.stderr.strip().splitlines()
    assert line.startswith(f"bert-keras export: error: {out}: no space left on its device (it needs about ")
    assert ".tmp-" not in line
    assert os.listdir(tmp_path) == []


def test_a_full_disk_writing_one_file_names_it_and_keeps_the_previous_one(tmp_path):
    from bert_keras.writing import DiskFullError, atomic_write, write_text

    path = tmp_path / "predictions.jsonl"
    write_text(path, "previous\n")

    def full(tmp):
        with open(tmp, "w") as f:
            f.write("x" * 3_000_000)
        raise OSError(28, "No space left on device")

    with pytest.raises(DiskFullError, match=rf"^{path}: no space left on its device \(3\.0 MB were written before"):
        atomic_write(path, full)
    assert path.read_text() == "previous\n"
    assert os.listdir(tmp_path) == ["predictions.jsonl"]


# --------------------------------------------------------------------------- Ctrl-C after the end
def test_an_interrupt_after_the_command_ended_keeps_its_exit_status(tmp_path):
    """Ctrl-C while the interpreter and TensorFlow tear down, after the result was printed: status 0."""
    code = textwrap.dedent("""
        import os, signal, sys, time
        from bert_keras import cli
        from bert_keras.cli import tokenize

        def run(args):
            print("done", flush=True)
            return 0

        tokenize.run = run
        sys.argv = ["bert-keras", "tokenize", "--vocab", "v.txt"]
        code = cli.main()
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, during the teardown that follows
        time.sleep(0.5)
        sys.exit(code)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120,
                            cwd=tmp_path)
    assert result.stdout == "done\n"
    assert result.returncode == 0, result.stderr
    assert "KeyboardInterrupt" not in result.stderr
