"""Export a model folder for deployment: a SavedModel for TF Serving, or TFLite files for LiteRT.

--model-dir takes any folder written by `finetune` or `save_checkpoint` (or a
Hugging Face / Google folder with a task head).

  saved_model  OUT/ with signatures `serving_default` (raw `text`, plus `text_b`
               for pair tasks; tokenised in graph) and `serve_ids` (token_ids,
               segment_ids, padding_mask); core TensorFlow ops only, so any TF
               Serving binary loads it.  Serve OUT as a numbered version
               folder (models/NAME/1).
  tflite       OUT/model.tflite (ids inputs) and OUT/model_text.tflite (int32
               Unicode codepoints in, Google-exact tokenizer inside), builtin
               ops only; --quantize adds a suffix (model_int8.tflite, ...); the
               other quantisations already in OUT are kept when exported with
               the same settings.  --length-buckets auto adds signatures
               length_16, length_32, ... to model.tflite: LiteRT then runs
               each batch at the smallest length holding its longest row.
  tfhub        OUT/preprocessor/ and OUT/encoder/ in TF Hub's "Common SavedModel
               APIs for Text" (hub.KerasLayer / tf.saved_model.load, like
               bert_en_uncased_preprocess and bert_en_uncased_L-12_H-768_A-12);
               --model-dir may be any checkpoint folder (pre-trained or
               fine-tuned: its encoder); --max-seq-len is the preprocessor's
               default length (128).

OUT is written to a temporary sibling and renamed into place when complete
(TF Serving never sees a half-written version); nothing the exporter did not
write is ever deleted.

examples:
  bert-keras export --model-dir runs/sentiment/best --out serving/sentiment/1
  bert-keras export --model-dir runs/sentiment/best --out tflite --format tflite --quantize float16
  bert-keras export --model-dir runs/sentiment/best --out tflite --format tflite --quantize dynamic \\
      --length-buckets auto
  bert-keras export --model-dir runs/sentiment/best --out tflite --format tflite --quantize int8_mixed \\
      --calibration-file dev_sentences.txt
  bert-keras export --model-dir runs/mrpc/best --out serving/mrpc/1 --pair --max-seq-len 128
  bert-keras export --model-dir MiniLM --out hub/minilm --format tfhub
"""

import json

from bert_keras.choices import CALIBRATED, QUANTIZE
from bert_keras.cli._task_data import add_casing_arguments



def add_arguments(p):
    p.add_argument("--model-dir", required=True, help="model folder (finetune / save_checkpoint output)")
    p.add_argument("--out", required=True,
                   help="output folder (SavedModel folder, or folder for the .tflite files): new, empty, or a "
                        "previous export of the same format, which is replaced as a whole; any other non-empty "
                        "folder, or one equal to or containing --model-dir, is refused")
    p.add_argument("--format", choices=("saved_model", "tflite", "tfhub"), default="saved_model")
    p.add_argument("--quantize", choices=QUANTIZE, default="none", help="TFLite only (default: none = float32)")
    p.add_argument("--max-seq-len", type=int,
                   help="sequence length of the text input (default: the folder's, else 128)")
    p.add_argument("--pair", action="store_true", default=None,
                   help="classification on sentence pairs: the text input also takes text_b")
    p.add_argument("--calibration-file",
                   help="int8, int8_mixed: real sentences, one a line (TAB-separated pairs for pair models); "
                        "200 are used")
    p.add_argument("--length-buckets", metavar="auto|L1,L2,...",
                   help="TFLite: extra signatures of model.tflite at shorter lengths (auto: 16, 24, ..., 64, 80, 96, ... "
                        "below --max-seq-len); classification, regression and multiple choice")
    p.add_argument("--no-ids-only-copy", action="store_true",
                   help="accepted for older scripts; does nothing (no OUT/ids_only is written any more: the "
                        "SavedModel itself loads without tensorflow-text)")
    add_casing_arguments(p)


def _calibration(path):
    from bert_keras.errors import BertKerasError

    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    except OSError as e:
        raise BertKerasError(f"{path}: cannot read the calibration file ({e.strerror})") from e
    if not lines:
        raise BertKerasError(f"{path}: no sentences in the calibration file")
    return [tuple(line.split("\t", 1)) if "\t" in line else line for line in lines]


def run(args) -> int:
    from bert_keras.errors import BertKerasError

    if args.format == "tflite" and args.quantize in CALIBRATED and not args.calibration_file:
        raise BertKerasError(f"--quantize {args.quantize} needs --calibration-file (real sentences of the "
                             "task's kind, one a line)")
    if args.max_seq_len is not None and not 3 <= args.max_seq_len <= 512:
        raise BertKerasError(f"--max-seq-len must be in 3..512 (omit it for the folder's), got {args.max_seq_len}")
    if args.length_buckets and args.format != "tflite":
        raise BertKerasError("--length-buckets applies to --format tflite only")
    if args.format == "saved_model":
        if args.quantize != "none":
            raise BertKerasError("--quantize applies to --format tflite only")
        from bert_keras.export.saved_model import export_saved_model, saved_model_size_mb

        print(f"exporting {args.model_dir} as a SavedModel ...", flush=True)
        out = export_saved_model(args.model_dir, args.out, max_seq_len=args.max_seq_len, pair=args.pair,
                                 ids_only_copy=not args.no_ids_only_copy, lower_case=args.lower_case)
        print(json.dumps({"saved_model": out, "mb": round(saved_model_size_mb(out), 2),
                          "signatures": ["serving_default", "serve_ids"]}))
        return 0
    if args.format == "tfhub":
        if args.quantize != "none":
            raise BertKerasError("--quantize applies to --format tflite only")
        from bert_keras.export.tfhub import export_tfhub

        print(f"exporting {args.model_dir} in the TF Hub convention ...", flush=True)
        print(json.dumps(export_tfhub(args.model_dir, args.out, seq_length=128 if args.max_seq_len is None else args.max_seq_len)))
        return 0
    from bert_keras.export.tflite import export_tflite, file_size_mb

    calibration = _calibration(args.calibration_file) if args.calibration_file else None
    print(f"exporting {args.model_dir} as TFLite ({args.quantize}) ...", flush=True)
    paths = export_tflite(args.model_dir, args.out, quantize=args.quantize, max_seq_len=args.max_seq_len,
                          calibration_texts=calibration, pair=args.pair, lower_case=args.lower_case,
                          length_buckets=args.length_buckets)
    print(json.dumps({**paths, "ids_mb": round(file_size_mb(paths["ids"]), 2),
                      "text_mb": round(file_size_mb(paths["text"]), 2) if paths["text"] else None}))
    return 0
