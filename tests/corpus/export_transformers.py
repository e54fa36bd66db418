#!/usr/bin/env python3
"""Exports the corpus's Hugging Face model: a BERT sequence classifier (random weights, tiny
config) as the TorchScript exporter writes it from `transformers`, with the two inputs every
such export has — int64 token ids and an attention mask, both [batch, sequence] with free dims.

Needs torch and transformers (pip; not a dependency of Whittle or of its tests, which read the
committed file):
    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch transformers onnx
    /tmp/tv/bin/python tests/corpus/export_transformers.py tests/corpus
"""
import os
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification


class IdsAndMask(torch.nn.Module):
    """The classifier's logits from input_ids and attention_mask (the usual export signature)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, num_labels=3, initializer_range=0.3,
                     attn_implementation="eager")
    model = IdsAndMask(BertForSequenceClassification(cfg)).eval()
    ids = torch.randint(0, 200, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    path = os.path.join(out, "hf_bert_ids_mask_op17.onnx")
    torch.onnx.export(model, (ids, mask), path, input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                    "attention_mask": {0: "batch", 1: "sequence"}, "logits": {0: "batch"}},
                      opset_version=17, dynamo=False)
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
