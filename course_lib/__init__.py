"""course_lib: the small shared package that every chapter notebook imports.

One module per idea, named after it. The models, in the order the chapters build them:

- ``attention``      scaled dot-product attention; one head, many heads, additive; the
                     key-value cache of decoding (``KVCache``)
- ``masks``          causal and padding masks (boolean, True = may attend)
- ``positional``     sinusoidal, learned, ALiBi and rotary positions
- ``blocks``         the Transformer block: Pre-Norm ``Block``, ``PostNormBlock``,
                     ``DecoderBlock``, and chapter 4's ``AblationBlock``
- ``timeseries``     chapter 5: windows of an hourly series, baselines, three forecasters
- ``tabular``        chapter 6: a feature tokenizer + [CLS] Transformer, an MLP, preprocessing
- ``gpt``            chapter 7: a decoder-only language model, with a KV cache for decoding
- ``ladder``         chapter 7: the rungs from a bigram to a GPT, one idea added per rung
- ``lm``             chapter 7: training and scoring language models: the optimizer, batches,
                     the loop on a stream of ids, perplexity by sliding windows
- ``ngram``          chapter 7's count baselines: unigram, add-k bigram, Kneser-Ney
- ``heads``          chapter 7: what heads learned: induction and previous-token scores, ablation
- ``text``           tokenizers (word level, byte-level BPE), vocabularies, next-token windows
- ``decoding``       greedy, beam search and sampling, for the GPT and the translator alike
- ``textscores``     generated text scored by something other than its model: n-gram perplexity
- ``finetune``       pretrain, then fine-tune: a classifier on a pretrained backbone, LoRA,
                     label-budget draws, BERT's masked-token corruption
- ``seq2seq``        chapter 9: the encoder-decoder translator (``Seq2SeqTransformer``)
- ``seq2seq_tools``  its argument checks, initialisation, ``nn.Transformer`` weights, cached steps
- ``losses``         label-smoothed cross-entropy
- ``schedules``      every learning-rate schedule for ``LambdaLR``: warm-up, cosine, Noam
- ``calibration``    is a model that says 70% right 70% of the time?
- ``distributed``    chapter 10: data-parallel training with ``torch.distributed``
- ``precision``      chapter 11: bf16 / float16 / float32, chosen by measuring the machine

And what every chapter shares:

- ``runtime``        seeds, device (cuda / mps / cpu), threads, progress bars, the folders
- ``machine``        the CPU's name, the per-machine cache folder, a quiet stderr for profiling
- ``checks``         the shared argument checks (positive sizes) and a file's SHA-256
- ``data``           one loader per dataset in ``data/``, each checking its sha256 first
- ``training``       a small ``fit`` loop with validation and early stopping
- ``tuning``         did a hyperparameter search look far enough?
- ``stats``          bootstrap intervals, paired or not; power-law fits
- ``cost``           what a computation costs: time, memory, and how both grow
- ``viz``            attention heatmaps, grids of heads, loss curves
- ``diagrams``       the architecture diagrams, drawn by code
- ``exercises``      the checks after each exercise
- ``results``        the results card each chapter writes at the end of a full run
"""

__version__ = "0.1.0"
