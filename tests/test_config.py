import json

import pytest

import bert_keras as bk
from bert_keras.config import PRESETS


@pytest.mark.parametrize("name,layers,hidden,heads", [
    ("tiny", 2, 128, 2), ("mini", 4, 256, 4), ("small", 4, 512, 8),
    ("medium", 8, 512, 8), ("base", 12, 768, 12), ("large", 24, 1024, 16)])
def test_presets_match_the_published_sizes(name, layers, hidden, heads):
    cfg = bk.BertConfig.preset(name)
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads) == (layers, hidden, heads)
    assert cfg.intermediate_size == 4 * hidden
    assert cfg.head_size == 64
    assert set(PRESETS) == {"tiny", "mini", "small", "medium", "base", "large"}


def test_json_round_trip_in_every_flavor(tmp_path):
    cfg = bk.BertConfig.preset("mini", vocab_size=1234, hidden_act="gelu_new", layer_norm_eps=1e-6)
    for flavor in ("bert_keras", "google", "huggingface"):
        path = tmp_path / f"{flavor}.json"
        cfg.to_json(path, flavor=flavor)
        back = bk.BertConfig.from_json(path)
        if flavor == "google":  # Google's file has no LayerNorm epsilon: it is always 1e-12
            assert back.layer_norm_eps == 1e-12
            back.layer_norm_eps = cfg.layer_norm_eps
        assert back == cfg


def test_reads_google_bert_config_json(tmp_path):
    google = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
              "max_position_embeddings": 512, "num_attention_heads": 12, "num_hidden_layers": 12,
              "type_vocab_size": 2, "vocab_size": 30522}
    (tmp_path / "bert_config.json").write_text(json.dumps(google))
    assert bk.BertConfig.from_json(tmp_path / "bert_config.json") == bk.BertConfig.preset("base")
    assert bk.BertConfig.from_json(tmp_path) == bk.BertConfig.preset("base")  # a folder works too


def test_reads_hugging_face_config_json(minilm_dir):
    cfg = bk.BertConfig.from_json(f"{minilm_dir}/config.json")
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_heads, cfg.intermediate_size) == (6, 384, 12, 1536)
    assert cfg.vocab_size == 30522 and cfg.hidden_act == "gelu"


@pytest.mark.parametrize("kwargs,field", [
    (dict(hidden_size=100, num_heads=12), "hidden_size"),
    (dict(hidden_act="gelu_fast_and_wrong"), "hidden_act"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(num_layers=-1), "num_layers"),
    (dict(dropout=1.5), "dropout"),
    (dict(intermediate_size=2.5), "intermediate_size"),
])
def test_invalid_values_raise_value_error_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        bk.BertConfig(**kwargs)


def test_malformed_json_is_one_clear_error(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 768,')
    with pytest.raises(ValueError, match="config.json: invalid JSON"):
        bk.BertConfig.from_json(bad)
    with pytest.raises(ValueError, match="not found"):
        bk.BertConfig.from_json(tmp_path / "missing.json")
    bad.write_text('{"model_type": "roberta", "vocab_size": 5, "hidden_size": 8, "num_hidden_layers": 1,'
                   ' "num_attention_heads": 2}')
    with pytest.raises(ValueError, match="not a BERT model"):
        bk.BertConfig.from_json(bad)
