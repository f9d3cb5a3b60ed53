"""Prisma's services: the embedder, the SAE trainer and encoder, the interpreter.

MKL, torch's fp32 BLAS on x86, picks a matrix product's blocking by its shape; on an AVX2-only CPU (or
under MKL_ENABLE_INSTRUCTIONS=AVX2) that made a text's fp32 vector differ by about 1e-7 between
embedded alone and embedded in a batch, which breaks the encoder's promise that a query meets its
stored document bit for bit (services/embedder/encoder.py `forward_chunks`). MKL's strict conditional
numerical reproducibility keeps it, at no measured cost (an e5-sized product 23.3 ms against 23.0 ms
capped, 15.4 against 14.9 uncapped). MKL reads the variable at its first matrix product, so it is set
here, when any service is first imported, before any product is run; a value set outside is kept.
"""

import os

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
