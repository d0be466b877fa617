"""The PyTorch tutorial's positional encoding, as users copy it: the inexact code posenc replaces.

Used by the tests (checkpoint migration, comparisons) and by the benchmarks (side-by-side timings). Two
orientations: the PyTorch tutorial's own, (seq, batch, d_model), and the batch-first one of the blog tutorials
(e.g. "The Hidden Beauty of Sinusoidal Positional Encodings in Transformers").
"""

from __future__ import annotations

import math

import torch
from torch import nn


def tutorial_table(length: int, d_model: int) -> torch.Tensor:
    """The tutorial's float32 table: ``pe[:, 0::2] = sin(position * div_term)``, cos in the odd columns."""
    position = torch.arange(length, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class TutorialPositionalEncoding(nn.Module):
    """The tutorial's module (batch-first, as the blog tutorials write it): ``dropout(x + pe[:, :L])``."""

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", tutorial_table(max_len, d_model).unsqueeze(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[:, : x.size(1)])


class SeqFirstTutorialPositionalEncoding(nn.Module):
    """The PyTorch tutorial's module as the tutorial itself writes it: ``pe`` of shape (max_len, 1, d_model),
    input ``(seq, batch, d_model)``, ``dropout(x + pe[:seq])``."""

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", tutorial_table(max_len, d_model).unsqueeze(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[: x.size(0)])
