"""Held-out masked-LM accuracy of a pre-trained checkpoint, split by the 80/10/10 rule.

    python training/diagnostics/heldout_mlm.py RUN/final HELDOUT.txt [--seq-len 128] [--batches 20]

HELDOUT.txt is in Google's pre-training format (`bk.data.pretraining_dataset`; the recipe's
held-out articles: `split_heldout`, see training/pretrain_mini_wiki.yaml).  Prints the JSON of
`bert_keras.training.pretrain.evaluate_pretrainer` with ``mask_id``: overall MLM accuracy,
accuracy at [MASK]ed targets (the context must tell), at kept targets (copying tells) and at
randomly replaced ones, the most-frequent-target baseline and the targets' unigram entropy
next to the MLM loss.  The same numbers `bert-keras pretrain` writes to eval.json since this
split was added, for checkpoints trained before.
"""
import argparse
import json
import os


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint")
    p.add_argument("heldout")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--max-predictions", type=int, default=20)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    args = p.parse_args(argv)

    import bert_keras as bk
    from bert_keras.data.pretraining import pretraining_dataset
    from bert_keras.text.vocab import load_vocab, token_ids
    from bert_keras.training.pretrain import evaluate_pretrainer

    vocab_path = os.path.join(args.checkpoint, "vocab.txt")
    model = bk.load_checkpoint(args.checkpoint, task="pretraining")
    data = pretraining_dataset([args.heldout], vocab_path, seq_len=args.seq_len,
                               max_predictions=args.max_predictions, batch_size=args.batch_size, seed=12345)
    result = evaluate_pretrainer(model, data, args.batches, mask_id=token_ids(load_vocab(vocab_path))["[MASK]"])
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
