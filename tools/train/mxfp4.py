"""MXFP4 (OCP microscaling, E2M1 values with an E8M0 scale per 32 inputs).

Per row, groups of 32 along the input dimension. Scale byte
s = ceil(log2(max|w| / 6)) + 127 clamped to 1..254 (255 is never emitted, an
all-zero group gets 1); each weight is rounded to the nearest E2M1 magnitude
of |w| / 2^(s-127), ties to the even code. Low nibble = even element.
"""
import torch

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                    dtype=torch.float64)
_MID = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=torch.float64)


def quantize(w):
    """w: [..., rows, cols] float -> (codes uint8 [..., rows, cols], scales uint8 [..., rows, cols/32])."""
    w = w.detach().to(torch.float64)
    *lead, cols = w.shape
    assert cols % 32 == 0
    g = w.reshape(*lead, cols // 32, 32)
    m = g.abs().amax(-1)                                    # [..., groups]
    mant, ex = torch.frexp(m / 6.0)                         # m/6 = mant * 2^ex, mant in [0.5, 1)
    ceil_log2 = torch.where(mant == 0.5, ex - 1, ex)
    s = torch.where(m > 0, ceil_log2 + 127, torch.ones_like(ex)).clamp(1, 254)
    scale = torch.pow(2.0, (s - 127).to(torch.float64))
    y = (g.abs() / scale.unsqueeze(-1)).clamp(max=6.0)
    code = torch.zeros_like(y, dtype=torch.int64)
    for c, mid in enumerate(_MID.tolist()):
        upper_even = (c + 1) % 2 == 0
        code += ((y > mid) | ((y == mid) & upper_even)).to(torch.int64)
    code = torch.where((g < 0) & (code > 0), code + 8, code)
    return code.reshape(*lead, cols).to(torch.uint8), s.to(torch.uint8)


def dequantize(codes, scales, dtype=torch.float32):
    vals = E2M1[codes.to(torch.int64)]
    *lead, cols = vals.shape
    sc = torch.pow(2.0, scales.to(torch.float64) - 127.0)
    out = vals.reshape(*lead, cols // 32, 32) * sc.unsqueeze(-1)
    return out.reshape(*lead, cols).to(dtype)


def quantize_dequantize(w):
    c, s = quantize(w)
    return dequantize(c, s, w.dtype)


def pack(codes):
    """[rows, cols] codes -> [rows, cols/2] bytes, element 2j in the low nibble."""
    c = codes.to(torch.int64)
    return (c[..., 0::2] | (c[..., 1::2] << 4)).to(torch.uint8)


def unpack(packed):
    p = packed.to(torch.int64)
    out = torch.stack([p & 0xF, p >> 4], -1)
    return out.reshape(*p.shape[:-1], p.shape[-1] * 2).to(torch.uint8)
