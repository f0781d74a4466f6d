"""TF Model Garden TF2 checkpoints, written by tf-models-official itself, read back."""

import os
import subprocess
import sys

import numpy as np
import pytest

import bert_keras as bk
from bert_keras.checkpoints import checkpoint_task
from tests.conftest import random_batch, reference

torch = reference("torch")
transformers = reference("transformers")


@pytest.fixture(scope="module")
def model_garden(tmp_path_factory, minilm_dir):
    """tf-models-official's BertEncoder with MiniLM's weights (through its own TF1 -> TF2 converter),
    saved as ``tf.train.Checkpoint(encoder=...)`` and, inside a ``BertPretrainerV2`` with a masked-LM
    head, as ``tf.train.Checkpoint(model=...)``; with its outputs on one batch."""
    root = tmp_path_factory.mktemp("model_garden")
    bk.save_checkpoint(bk.load_checkpoint(minilm_dir), root / "google", flavor="google")
    x = random_batch(30522, batch=3, length=20, seed=4)
    x["token_ids"][:, 0] = 101
    positions = np.array([[1, 3, 5], [2, 4, 6], [7, 8, 9]], "int32")
    np.savez(root / "batch.npz", positions=positions, **x)
    script = f"""
import numpy as np, tensorflow as tf
from official.legacy.bert import configs
from official.nlp.modeling import models
from official.nlp.tools import tf2_bert_encoder_checkpoint_converter as conv
cfg = configs.BertConfig.from_json_file({str(root / 'google' / 'bert_config.json')!r})
conv.convert_checkpoint(cfg, {str(root / 'encoder' / 'ckpt')!r}, {str(root / 'google' / 'bert_model.ckpt')!r},
                        checkpoint_model_name="encoder", converted_model="encoder")
encoder = conv._create_bert_model(cfg)
tf.train.Checkpoint(encoder=encoder).read(tf.train.latest_checkpoint({str(root / 'encoder')!r})).assert_existing_objects_matched()
x = np.load({str(root / 'batch.npz')!r})
inputs = dict(input_word_ids=x["token_ids"], input_mask=x["padding_mask"], input_type_ids=x["segment_ids"])
out = encoder(inputs)
seq, pooled = (out["sequence_output"], out["pooled_output"]) if isinstance(out, dict) else out[:2]
pre = models.BertPretrainerV2(encoder_network=encoder, mlm_activation=lambda t: tf.keras.activations.gelu(t, approximate=True))
mlm = pre(dict(inputs, masked_lm_positions=x["positions"]))["mlm_logits"]
rng = np.random.default_rng(0)  # a masked-LM head that is not the initial one
for v in pre.masked_lm.trainable_variables:
    v.assign(v + rng.normal(0, 0.05, v.shape).astype("float32"))
mlm = pre(dict(inputs, masked_lm_positions=x["positions"]))["mlm_logits"]
tf.train.Checkpoint(model=pre).save({str(root / 'pretrainer' / 'ckpt')!r})
np.savez({str(root / 'out.npz')!r}, seq=seq.numpy(), pooled=pooled.numpy(),
         mlm=mlm.numpy())
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_USE_LEGACY_KERAS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, x, positions, dict(np.load(root / "out.npz"))


def _real(a, b, mask):
    return float(np.abs(np.where(mask[..., None].astype(bool), np.asarray(a) - np.asarray(b), 0)).max())


def test_a_model_garden_encoder_checkpoint_reads_back_to_hugging_face_and_model_garden(model_garden, minilm_dir):
    root, x, _, ref = model_garden
    enc = bk.load_checkpoint(str(root / "encoder"))  # the folder tf.train.CheckpointManager wrote
    assert isinstance(enc, bk.BertEncoder) and checkpoint_task(str(root / "encoder")) is None
    assert enc.config.num_layers == 6 and enc.config.num_heads == 12 and enc.config.intermediate_size == 1536
    assert enc.config.hidden_act == "gelu_approximate"  # Model Garden's BertEncoder default
    ours = enc(x)
    seq = _real(ours["sequence_output"], ref["seq"], x["padding_mask"])
    pooled = float(np.abs(np.asarray(ours["pooled_output"]) - ref["pooled"]).max())
    # Hugging Face's BertModel on the same weights, with its name for the tanh GELU
    hf = transformers.BertModel.from_pretrained(minilm_dir, hidden_act="gelu_new").eval()
    with torch.no_grad():
        out = hf(input_ids=torch.tensor(x["token_ids"], dtype=torch.long),
                 token_type_ids=torch.tensor(x["segment_ids"], dtype=torch.long),
                 attention_mask=torch.tensor(x["padding_mask"], dtype=torch.long))
    hf_seq = _real(ours["sequence_output"], out.last_hidden_state.numpy(), x["padding_mask"])
    print(f"\nModel Garden checkpoint: sequence {seq:.2e} / pooled {pooled:.2e} from Model Garden's BertEncoder, "
          f"sequence {hf_seq:.2e} from Hugging Face")
    assert seq < 1e-5 and pooled < 1e-5  # measured 2.9e-6 and 2.0e-7
    assert hf_seq < 1e-5  # measured 2.3e-6


def test_a_model_garden_pretrainer_checkpoint_brings_its_masked_lm_head(model_garden):
    root, x, positions, ref = model_garden
    folder = str(root / "pretrainer")
    assert checkpoint_task(folder) == "pretraining"
    with pytest.warns(UserWarning, match="the MLM head is loaded, the NSP head is new"):
        pre = bk.load_checkpoint(folder, task="pretraining")
    logits = np.asarray(pre(dict(x, masked_positions=positions))["mlm_logits"])
    diff = float(np.abs(logits - ref["mlm"]).max())
    print(f"\nModel Garden masked-LM logits: {diff:.2e} from BertPretrainerV2's")
    assert diff < 1e-4, diff  # measured 9.3e-6 (logits of size ~10)


def test_an_object_based_checkpoint_without_a_bert_encoder_is_one_line(tmp_path):
    tf = pytest.importorskip("tensorflow")
    tf.train.Checkpoint(step=tf.Variable(3)).write(str(tmp_path / "ckpt"))
    with pytest.raises(bk.errors.CheckpointError, match="without a Model Garden BertEncoder"):
        bk.load_checkpoint(str(tmp_path))
