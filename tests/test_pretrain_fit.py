"""On one device, Keras' stock TensorFlow training step (`fit`) and `BertPretrainer`'s own step as
the pre-training runner calls it (`tensorflow_steps.train_steps`) give the same weights."""

import numpy as np

from tests.test_pretrain import corpus  # noqa: F401 - the fixture is used by name

STEPS = 6


def test_keras_stock_step_and_the_runners_step_end_with_the_same_weights_for_the_same_batches(corpus):  # noqa: F811
    import keras
    import tensorflow as tf

    import bert_keras as bk
    from bert_keras.training.optimization import WarmupPolynomialDecay, create_optimizer
    from bert_keras.training.tensorflow_steps import train_steps

    class StockStep(bk.BertPretrainer):
        def train_step(self, data):  # Keras' own TensorFlow step (TensorFlowTrainer.train_step)
            return keras.Model.train_step(self, data)

    batches = list(bk.data.pretraining_dataset(corpus[0], corpus[1], seq_len=32, max_predictions=5,
                                               batch_size=4, seed=0).take(STEPS))
    stacked = tuple({k: tf.stack([b[i][k] for b in batches]) for k in batches[0][i]} for i in (0, 1))
    vocab_size = len(open(corpus[1]).read().split())
    keras.utils.set_random_seed(0)
    config = bk.BertConfig.preset("tiny", vocab_size=vocab_size, dropout=0.0, attention_dropout=0.0)
    fit_model = StockStep(bk.BertEncoder(config))
    ours_model = bk.BertPretrainer(bk.BertEncoder(config))
    ours_model.set_weights(fit_model.get_weights())
    start = [w.copy() for w in fit_model.get_weights()]

    def optimizer(clipnorm):
        return create_optimizer("adamw", WarmupPolynomialDecay(1e-3, STEPS, 2), weight_decay=0.01,
                                clipnorm=clipnorm, epsilon=1e-6, adam_rule="torch")

    fit_model.compile(optimizer=optimizer(1.0))
    fit_model.fit(tf.data.Dataset.from_tensor_slices(stacked), epochs=1, steps_per_epoch=STEPS, verbose=0,
                  shuffle=False)
    ours_optimizer = optimizer(1.0)
    ours_model.compile(optimizer=ours_optimizer)
    train_steps(ours_model, iter(tf.data.Dataset.from_tensor_slices(stacked)), STEPS)

    assert int(fit_model.optimizer.iterations.numpy()) == int(ours_optimizer.iterations.numpy()) == STEPS
    names = [v.path for v in fit_model.weights]
    worst, moved = {}, 0.0
    for name, a, b, s in zip(names, fit_model.get_weights(), ours_model.get_weights(), start):
        if "seed_generator" in name:
            continue
        worst[name] = float(np.abs(a - b).max())
        moved = max(moved, float(np.abs(a - s).max()))
    worst = max(worst.values())
    print(f"\nKeras' step vs ours: largest weight difference {worst:.2e} after {STEPS} steps (largest update {moved:.2e})")
    assert moved > 1e-3  # both trained
    # measured: 0 (both take cross_entropy.sparse_softmax_cross_entropy); 1.2e-7 with Keras' cross-entropy
    # on the fit side; 3.1e-5 when Keras clipped the norm of the embedding's un-summed IndexedSlices rows
    assert worst < 1e-6
