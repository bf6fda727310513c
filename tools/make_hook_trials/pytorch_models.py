"""The PyTorch models of pytorch_architectures.py: a small CNN, a ResNet-style net with
BatchNorm and one ReLU module per block called twice, an LSTM classifier and a pre-LN
transformer encoder block (nn.MultiheadAttention, nn.LayerNorm, nn.GELU)."""

import torch
import torch.nn as nn

N_CLASSES = 3
IMG, SEQ, SEQ_FEATURES = 6, 12, 4


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 8, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, N_CLASSES)

    def forward(self, x):
        x = self.pool(self.relu1(self.conv1(x)))
        x = self.gap(self.relu2(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


class Block(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)
        self.relu = nn.ReLU(inplace=True)  # called twice per forward, as torchvision's

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))  # call 0
        out = self.bn2(self.conv2(out))
        return self.relu(out + x)  # call 1


class ResNet(nn.Module):
    def __init__(self, ch=2):
        super().__init__()
        self.stem = nn.Conv2d(1, ch, 3, padding=1)
        self.layer1 = Block(ch)
        self.layer2 = Block(ch)
        self.fc = nn.Linear(ch * IMG * IMG, N_CLASSES)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


class LSTMNet(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.lstm = nn.LSTM(SEQ_FEATURES, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, N_CLASSES)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


class EncoderBlock(nn.Module):
    def __init__(self, d=8, heads=2, ff=16):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, ff)
        self.gelu = nn.GELU()
        self.ff2 = nn.Linear(ff, d)

    def forward(self, x):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=True)
        x = x + a
        return x + self.ff2(self.gelu(self.ff1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.embed = nn.Linear(SEQ_FEATURES, d)
        self.pos = nn.Parameter(torch.randn(1, SEQ, d) * 0.1)
        self.block = EncoderBlock(d)
        self.head = nn.Linear(d, N_CLASSES)

    def forward(self, x):
        h = self.block(self.embed(x) + self.pos)
        return self.head(h.mean(dim=1))
