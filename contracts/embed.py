"""Embedder service contracts: query embedding over HTTP, embedding runs over the `embedder` queue.

Documents longer than the model's window are embedded by chunk-and-average (no token is
dropped); the run's artifacts are laid out in shards so that a killed worker resumes:

- `{artifact_prefix}/embeddings/shard-00000.npy`: float32 [docs_in_shard, d], document order.
- `{artifact_prefix}/chunks/shard-00000.npz`: the chunk vectors (provenance), see `ChunkArrays`.
- `{artifact_prefix}/segments/shard-00000.npz`: with `spec.segments`, one vector per segment
  (sentence) of every document, see `SEGMENT_ARRAYS`.
- `{artifact_prefix}/spec.json`: what the shards were computed with (a resumed run must match).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from contracts.artifacts import ArtifactInfo
from contracts.packed import PackedArray

#: 'mean': over each chunk's tokens with its special tokens, padding excluded: what
#: sentence-transformers does and the model was trained with (a short text then matches the
#: model's own vector, cosine > 0.9999); 'mean_content': content tokens only, specials
#: excluded (the design brief's wording; cosine 0.88 with the model's own vector for
#: "hello world"); 'cls': the first token of each chunk. Chunk vectors are then averaged.
Pooling = Literal["mean", "mean_content", "cls"]

#: Names of the arrays in a chunks shard (`numpy.load(...)[name]`), with dtype and shape.
CHUNK_ARRAYS: dict[str, str] = {
    "vectors": "float16 [C, d]: each chunk's pooled vector, before averaging and normalisation",
    "position": "int64 [C]: the document's position in the dataset snapshot",
    "token_start": "int32 [C]: first token of the chunk, in the document's tokens without specials",
    "token_end": "int32 [C]: one past the chunk's last token",
    "char_start": "int32 [C]: character offset in the text where the chunk starts",
    "char_end": "int32 [C]: character offset one past where the chunk ends",
}


#: Names of the arrays in a segments shard, with dtype and shape. Rows are in document order, and
#: within a document in text order; every document has at least one segment (an empty or
#: white-space text has one spanning the whole text).
SEGMENT_ARRAYS: dict[str, str] = {
    "vectors": "float16 [S, d]: each segment embedded on its own (chunk-and-average, the run's pooling), "
               "unit norm when the run normalises",
    "position": "int64 [S]: the document's position in the dataset snapshot, non-decreasing",
    "char_start": "int32 [S]: character offset in the document's text where the segment starts",
    "char_end": "int32 [S]: character offset one past where it ends",
}
#: With `word_states`, also in a segments shard: every white-space word of the shard's documents, in order.
WORD_ARRAYS: dict[str, str] = {
    "word_vectors": "float16 [W, d]: the mean of the word's pieces' last hidden states in its note, unit norm",
    "word_segment": "int64 [W]: the row (in this shard) of the segment the word lies in, non-decreasing",
}


class EmbedRequest(BaseModel):
    """Texts to embed now (queries, labels): bounded, synchronous work."""

    model_config = ConfigDict(extra="forbid")

    texts: list[str] = Field(
        min_length=1,
        description="Texts to embed, at most the service's max_texts, each at most max_chars characters. "
        "Long texts are chunk-and-averaged, never truncated.",
    )
    model: str | None = Field(
        default=None,
        description="A model name of the allowlist; None or 'default' for the service's default model "
        "(multilingual-e5-small).",
    )
    pooling: Pooling = Field(default="mean", description="Per-chunk pooling: 'mean', 'mean_content' or 'cls' (see Pooling).")
    normalize: bool = Field(default=True, description="Scale each output vector to unit L2 norm.")
    prompt_name: str | None = Field(
        default=None, max_length=50,
        description="A prompt of the model put before every chunk, as sentence-transformers' prompt_name: "
        "E5 has 'passage' (documents, its default) and 'query' (search queries, labels); 'none' for no "
        "prompt. None: the model's default. A model without prompts ignores it.",
    )


class EmbedResponse(BaseModel):
    """One vector per input text, in input order."""

    model: str = Field(description="The model as requested ('default' or the path / hub id).")
    model_name: str | None = Field(default=None, description="The allowlist name it resolved to ('default' "
                                   "becomes the default model's own name): what a run records.")
    prompt_name: str | None = Field(default=None, description="The prompt put before each chunk (None: none).")
    dim: int = Field(description="Vector dimension d.")
    vectors: list[list[float]] = Field(description="float32 vectors [len(texts), d].")
    n_chunks: list[int] = Field(description="Chunks each text was split into (1 for texts within the window).")
    n_tokens: list[int] = Field(description="Tokens fed to the model per text, special tokens included.")


class ModelInfo(BaseModel):
    """A loaded model, as `GET /models/default` describes it."""

    name: str = Field(description="The name it is requested by ('default', a path or a hub id).")
    path: str = Field(description="The local directory it was loaded from.")
    dim: int = Field(description="Output dimension d.")
    max_length: int = Field(description="L_max: tokens per forward pass, special tokens included.")
    n_special: int = Field(description="Special tokens added to each chunk (2 for BERT: [CLS], [SEP]).")
    device: str = Field(description="Where it runs: cpu, cuda, cuda:1, ...")
    precision: str = Field(description="fp32, bf16, fp16, or int8 (int8 Linear layers, float32 between them).")
    prompts: dict[str, str] = Field(default_factory=dict, description="The model's prompts by name "
                                    "(E5: passage, query); empty for a model without.")
    default_prompt: str | None = Field(default=None, description="The prompt used when none is named.")
    provenance: dict | None = Field(default=None, description="Where a shipped model comes from: package and "
                                    "version, the bundled file's SHA-256, upstream model, licences, how its "
                                    "weights were made.")


PAD_MULTIPLE = 4
"""A new run's `pad_multiple` (services/embedder/chunking.py `padded_length`)."""


IN_CONTEXT_UNITS = ("token", "word")
"""Segment units read in the note by the documents' own pass (services/embedder/segments.py `token_segments`),
not cut from its text and embedded alone: no `document_vectors: 'segments'`, no ranking of a query against them."""


class EmbeddingRunSpec(BaseModel):
    """How a dataset is embedded: one model, one pooling, one chunking."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="default", min_length=1, max_length=300,  # the runs table's column
                       description="A model name of the allowlist, or 'default' (a new run records the "
                       "default's own name, multilingual-e5-small, so a later change of default leaves it be).")
    prompt_name: str | None = Field(
        default=None, max_length=50,
        description="The model's prompt before every document and segment chunk (E5: 'passage', its "
        "default); None: the model's default, recorded by name when the run is created.",
    )
    pooling: Pooling = Field(default="mean", description="Per-chunk pooling: 'mean', 'mean_content' or 'cls' (see Pooling).")
    normalize: bool = Field(default=True, description="Unit-norm document vectors (the model's own pipeline does).")
    max_length: int | None = Field(
        default=None, ge=3, le=32_768,
        description="Override L_max (tokens per chunk, specials included); None: the model's own "
        "(sentence_bert_config.json max_seq_length, else the tokenizer's limit).",
    )
    shard_size: int = Field(
        default=2048, ge=1, le=100_000,
        description="Documents per shard: the unit of checkpointing, so a killed worker recomputes at "
        "most this many. 2048 is about a minute of CPU work for MiniLM on abstracts.",
    )
    batch_tokens: int | None = Field(
        default=None, ge=16, le=1_048_576,
        description="Padded tokens per forward batch; None: the service's setting for its device.",
    )
    precision: Literal["auto", "fp32", "bf16", "fp16", "int8"] | None = Field(
        default=None,
        description="The run's own precision; None: the embedder's setting (PRISMA_EMBEDDER_PRECISION, 'auto': "
        "bf16 where the CPU or GPU has it, else int8 on CPU). 'int8' (CPU only): the encoder's Linear layers "
        "in int8, cosine with fp32 >= 0.99. The result records the precision the shards ran in.",
    )
    segments: bool = Field(
        default=False,
        description="Also embed every segment (a clause by default: `segment_unit`) of every document on its "
        "own, each distinct text once, kept with its character span (`segments/` shards): what an SAE run needs "
        "to tell one mention's status from another's in a long note (an SAE run on it then trains on segments "
        "and pools their codes, unless its config says otherwise). Off by default here (the dashboard's form "
        "turns it on): it adds the segments' time and storage (~36 float16 clause vectors a demo note; "
        "`document_vectors: 'segments'` then saves reading the notes again).",
    )
    segment_unit: Literal["clause", "sentence", "token", "word"] = Field(
        default="clause",
        description="What a segment is (with `segments`): a clause (a sentence cut after `,` `;` `:` and "
        "before `ma`, `but`, …: where a hedge's or a negation's scope ends; the default), a whole sentence, "
        "a token (each word piece's last hidden state as the model read it in its note) or a word (the mean of "
        "its pieces' states). Tokens and words are kept from the documents' own pass (the note is read once; "
        "on E3C's cases about ten words or seventeen pieces a clause, so that many times the segments' storage). An SAE on them reads "
        "a note as the max over its words' (or pieces') codes, where a cue word and the words it governs are "
        "features of their own: on the E3C clinical cases (four languages' means) they beat clauses and TF-IDF at "
        "every label budget "
        "(bench/results/e3c-words.json, e3c-tokens.json). See services/embedder/segments.py.",
    )
    document_vectors: Literal["encoded", "segments"] = Field(
        default="encoded",
        description="How a document's vector is made. 'encoded' (the default): the document's own text "
        "through the model, chunk-and-average. 'segments' (needs `segments`): the mean of its segments' "
        "vectors, each weighted by its content tokens, so the document's text is not read by the model "
        "a second time (on the demo's notes about 70 % of the tokens); its chunks are then its segments. "
        "Clause probes barely move, text search over documents is weaker (known-item MRR 0.94 -> 0.84 "
        "on Medical Abstracts; bench/results/doc-vectors.json).",
    )

    word_states: bool = Field(
        default=False,
        description="With clause or sentence segments (and 'encoded' document vectors): also keep every white-space "
        "word's state as the model read it in its note (the mean of its pieces' last hidden states, from the "
        "documents' own pass), with the segment it lies in. An SAE run then trains on the words and reads a segment "
        "as the max over its words' codes; segments stay what is shown, named and searched. Where each document is "
        "one sentence (E3C's clinical cases, four languages) the probe gains 0.08-0.09 F1 at 50 to 200 labels; in "
        "notes of many mentions (the demo) a word's state is read across the whole note and the clause probe lost "
        "0.22 (bench/results/e3c-word-states.json, status-word-states.json). A float16 vector per word.",
    )
    pad_multiple: int = Field(
        default=PAD_MULTIPLE, ge=1, le=64,
        description="Each sequence is padded to a width fixed by its own length (so that a text gets the same "
        "vector alone as in any batch), at least a multiple of this: 4 (the default) puts a note's short clauses "
        "in a few widths, so one note is a few forward passes, not a dozen. Runs made before it was recorded "
        "used 1.",
    )

    @field_validator("document_vectors")
    @classmethod
    def _documents_from_segments_need_segments(cls, value: str, info: ValidationInfo) -> str:
        if value == "segments" and not info.data.get("segments"):
            raise ValueError("'segments' makes each document's vector from its segments' vectors, so it needs "
                             "segments: true")
        if value == "segments" and info.data.get("segment_unit") in IN_CONTEXT_UNITS:
            raise ValueError(f"'segments' does not apply to segment_unit '{info.data['segment_unit']}': its "
                             "segments come from the documents' own pass, which gives the documents' vectors; "
                             "leave it 'encoded'")
        return value

    @field_validator("word_states")
    @classmethod
    def _word_states_need_clauses(cls, value: bool, info: ValidationInfo) -> bool:
        data = info.data
        if value and (not data.get("segments") or data.get("segment_unit") in IN_CONTEXT_UNITS):
            raise ValueError("words are kept beside clause or sentence segments; this run has "
                             + ("no segments" if not data.get("segments") else f"segment_unit '{data['segment_unit']}'"))
        if value and data.get("document_vectors") == "segments":
            raise ValueError("the words are read by the documents' own pass, which document_vectors 'segments' "
                             "skips; leave document_vectors 'encoded' or word_states false")
        return value


class EmbedJobPayload(BaseModel):
    """The `embed_run` job on the `embedder` queue (JSON)."""

    model_config = ConfigDict(extra="forbid")

    run_id: int = Field(description="The gateway's embedding run id (for logs and progress).")
    snapshot_uri: str = Field(
        description="Dataset snapshot (Parquet: position, doc_id, external_id, text, labels, metadata) "
        "in the artifact store."
    )
    artifact_prefix: str = Field(
        min_length=1, description="Key prefix in the store for this run's files, e.g. 'embedding-runs/3'."
    )
    spec: EmbeddingRunSpec = Field(default_factory=EmbeddingRunSpec, description="How to embed.")


class EmbedJobResult(BaseModel):
    """What an embedding run produced; the gateway catalogues the shards."""

    model: str = Field(description="The model as requested.")
    model_path: str = Field(description="The local directory it was loaded from.")
    dim: int = Field(description="Vector dimension d.")
    max_length: int = Field(description="L_max used (specials included).")
    device: str = Field(default="cpu", description="Where the computed shards ran.")
    precision: str = Field(default="fp32", description="Dtype the computed shards ran in.")
    engine: str = Field(default="torch", description="What ran them: 'torch', or 'ctranslate2' (int8 on CPU).")
    prompt: str | None = Field(default=None, description="The prompt text before every chunk ('passage: ').")
    model_provenance: dict | None = Field(default=None, description="Where a shipped model comes from (ModelInfo).")
    n_documents: int = Field(description="Documents in the snapshot (= rows over all shards).")
    n_chunks: int = Field(description="Chunks over all documents.")
    n_tokens: int = Field(description="Tokens fed to the model over all chunks, specials included.")
    shards: list[ArtifactInfo] = Field(description="Embedding shards in order: float32 [docs_in_shard, d] .npy.")
    chunks: list[ArtifactInfo] = Field(description="Chunk shards in order (.npz, arrays as CHUNK_ARRAYS).")
    segments: list[ArtifactInfo] = Field(
        default_factory=list,
        description="Segment shards in order (.npz, arrays as SEGMENT_ARRAYS); empty unless spec.segments.",
    )
    n_segments: int = Field(default=0, description="Segments over all documents (0 unless spec.segments).")
    segment_unit: str | None = Field(default=None, description="What a segment is (spec.segment_unit), with segments.")
    n_segments_computed: int = Field(default=0, description="Segments of the shards this invocation computed.")
    n_segments_embedded: int = Field(
        default=0, description="Of those, the ones the model embedded: each distinct text (after the tokenizer's "
        "normalisation) once per run; a repeat gets its first copy's vector, the same bit for bit.",
    )
    seconds: float = Field(description="Wall time of this invocation.")
    docs_per_s: float = Field(description="Documents computed (not reused) per second in this invocation.")
    tokens_per_s: float = Field(description="Tokens computed per second in this invocation.")
    chunks_per_doc_histogram: dict[str, int] = Field(
        description="How many documents were split into k chunks, keyed by str(k)."
    )
    shards_computed: int = Field(description="Shards computed by this invocation.")
    shards_reused: int = Field(description="Shards found complete in the store (a resumed run) and kept.")


class EmbeddingImportResult(BaseModel):
    """What an imported embedding run holds (`POST /api/v1/embedding-runs/import`): the uploaded
    vectors as shards in the embedded runs' layout, without chunk provenance."""

    name: str = Field(description="The model's name as given; the run's model is 'imported:<name>'.")
    source: str = Field(description="The uploaded file's name.")
    format: Literal["npy", "parquet"] = Field(description="'npy': rows in position order; 'parquet': keyed by id.")
    id_column: str | None = Field(description="The Parquet file's id column (external_id, doc_id or position).")
    dtype: str = Field(description="The uploaded values' type; shards are float32.")
    dim: int = Field(description="Vector dimension d.")
    n_documents: int = Field(description="Documents = rows over all shards, in dataset position order.")
    normalize: bool = Field(description="Whether each vector was scaled to unit L2 norm before it was stored.")
    norm_min: float = Field(description="The smallest L2 norm among the uploaded vectors (before any scaling).")
    norm_max: float = Field(description="The largest L2 norm among the uploaded vectors (before any scaling).")
    shards: list[ArtifactInfo] = Field(description="Embedding shards in order: float32 [docs_in_shard, d] .npy.")
    chunks: list[ArtifactInfo] = Field(
        default_factory=list, description="Always empty: imported vectors have no chunk provenance.",
    )
    segments: list[ArtifactInfo] = Field(
        default_factory=list,
        description="Segment shards in order (.npz, arrays as SEGMENT_ARRAYS, one per embeddings shard) when "
        "segment vectors were imported; empty otherwise.",
    )
    n_segments: int = Field(default=0, description="Segment rows stored (uploaded ones plus filled ones).")
    n_segments_uploaded: int = Field(default=0, description="Segments in the uploaded segments file.")
    n_documents_without_segments: int = Field(
        default=0, description="Documents the segments file had no segment for: each got one spanning its "
        "whole text with the document's own vector (as the embedder does for a text without a sentence).",
    )


class PassageRequest(BaseModel):
    """`POST /passages`: texts embedded now as an embedding run embeds its documents (its model, prompt,
    precision, pooling, chunk-and-average, and its segments), so that a note sent as text meets the run's
    stored vectors exactly (classify, encode)."""

    model_config = ConfigDict(extra="forbid")

    texts: list[str] = Field(min_length=1, description="The documents' texts, in order.")
    spec: EmbeddingRunSpec = Field(description="The run's spec as it recorded it.")
    documents: bool = Field(default=True, description="Also the documents' own vectors (an SAE whose document "
                            "codes are the max over segments does not read them).")


class PassageSegments(BaseModel):
    """Every segment of the texts, in text order then document order (as a run's segment shard)."""

    doc: PackedArray = Field(description="int64 [S]: the text each segment belongs to, non-decreasing.")
    start: PackedArray = Field(description="int32 [S]: character offset where the segment starts.")
    end: PackedArray = Field(description="int32 [S]: one past its last character.")
    vectors: PackedArray = Field(description="float16 [S, d]: as a run's segment shard stores them.")
    word_vectors: PackedArray | None = Field(default=None, description="With the spec's word_states: float16 "
                                             "[W, d], every word read in its text (WORD_ARRAYS).")
    word_segment: PackedArray | None = Field(default=None, description="int64 [W]: each word's segment (its row).")


class PassageResponse(BaseModel):
    """What the texts became, and what made them (to check against what the run recorded)."""

    model_name: str = Field(description="The model's own name ('default' resolved).")
    precision: str = Field(description="Dtype the model ran in (fp32, bf16, fp16, int8).")
    engine: str = Field(description="'torch', or 'ctranslate2' for int8 on CPU.")
    prompt: str | None = Field(default=None, description="The prompt text before every chunk ('passage: ').")
    provenance: dict | None = Field(default=None, description="The shipped model's provenance (its file's SHA-256).")
    dim: int = Field(description="Vector dimension d.")
    documents: PackedArray | None = Field(default=None, description="float32 [texts, d], as a run's embeddings "
                                          "shard stores them; None unless asked.")
    segments: PassageSegments | None = Field(default=None, description="None unless the spec has segments.")
