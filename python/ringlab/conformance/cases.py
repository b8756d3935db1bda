"""Case folders written by `ringlab conformance cases DIR` (format ringlab-conformance-case/1)."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional

import numpy as np

FORMAT = "ringlab-conformance-case/1"
INPUTS = ("q", "k", "v", "dout")
OUTPUTS = ("out", "lse", "dq", "dk", "dv")
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp64": "float64"}
# What `ringlab conformance cases` writes (and its own reader accepts): the inputs in float32 (bf16 and
# fp16 cases too: their values are exact in float32), the float64 oracle's outputs in float64.
FILE_DTYPES = {**{name: np.dtype("<f4") for name in INPUTS}, **{name: np.dtype("<f8") for name in OUTPUTS}}


class CaseError(ValueError):
    """A case folder that cannot be read: the message names the folder and the file."""


@dataclasses.dataclass
class Case:
    name: str
    folder: str
    meta: dict
    B: int
    S: int
    H: int
    HKV: int
    D: int
    dtype: str  # fp32 | bf16 | fp16
    causal: bool
    window: int
    docs: Optional[List[int]]
    scale: float
    P: int
    layout: str
    positions: List[np.ndarray]
    tolerances: Dict[str, Dict[str, float]]
    title: str = ""
    _arrays: Optional[Dict[str, np.ndarray]] = None

    @property
    def torch_dtype(self) -> str:
        return DTYPES[self.dtype]

    def arrays(self) -> Dict[str, np.ndarray]:
        if self._arrays is None:
            arrays = {}
            shapes = {"q": (self.B, self.S, self.H, self.D), "dout": (self.B, self.S, self.H, self.D),
                      "k": (self.B, self.S, self.HKV, self.D), "v": (self.B, self.S, self.HKV, self.D),
                      "out": (self.B, self.S, self.H, self.D), "dq": (self.B, self.S, self.H, self.D),
                      "dk": (self.B, self.S, self.HKV, self.D), "dv": (self.B, self.S, self.HKV, self.D),
                      "lse": (self.B, self.H, self.S)}
            for name, shape in shapes.items():
                path = os.path.join(self.folder, name + ".npy")
                if not os.path.exists(path):
                    raise CaseError(f"case {self.name}: {name}.npy is missing in {self.folder}; write the cases "
                                    "again with `ringlab conformance cases DIR --force`")
                try:
                    a = np.load(path, allow_pickle=False)
                except Exception as e:
                    raise CaseError(f"case {self.name}: {name}.npy cannot be read ({e})") from e
                check_file_dtype(self.name, self.folder, name, a.dtype)
                if a.shape != shape:
                    raise CaseError(f"case {self.name}: {name}.npy has shape {a.shape}, case.json says {shape}")
                arrays[name] = a.astype(np.float64)
            self._arrays = arrays
        return self._arrays

    def family(self) -> str:
        """The case's name without its P suffix ("...-p4"), to follow one problem across P."""
        base = self.name
        suffix = f"-p{self.P}"
        return base[: -len(suffix)] if base.endswith(suffix) else base

    def doc_ids(self) -> Optional[np.ndarray]:
        if not self.docs:
            return None
        return np.repeat(np.arange(len(self.docs)), self.docs)

    def stands_for(self) -> str:
        reports = [r.get("report", "") for r in self.meta.get("stands_for", []) if r.get("report")]
        return "; ".join(reports) or self.meta.get("stands_for_note", "")


def check_file_dtype(case: str, folder: str, name: str, dtype) -> None:
    """A case file in another dtype than the one `ringlab conformance cases` writes is refused: converted
    silently, an int32 or float16 input would make the oracle's answer wrong for a correct implementation."""
    want = FILE_DTYPES[name]
    if np.dtype(dtype) != want:
        kind = "inputs" if name in INPUTS else "oracle outputs"
        raise CaseError(f"case {case}: {name}.npy in {folder} is {np.dtype(dtype)}, `ringlab conformance cases` writes its "
                        f"{kind} as {want.name}; write the cases again with `ringlab conformance cases DIR --force`")


def _npy_dtype(path: str):
    """The dtype in a .npy file's header (the data is not read)."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read is None:
            raise ValueError(f"npy format version {version}")
        return read(f)[2]


def _need(meta: dict, key: str, folder: str):
    if key not in meta:
        raise CaseError(f"{os.path.join(folder, 'case.json')}: no key '{key}' (format {FORMAT})")
    return meta[key]


def load_case(folder: str) -> Case:
    path = os.path.join(folder, "case.json")
    if not os.path.exists(path):
        raise CaseError(f"{folder}: no case.json (not a case folder written by `ringlab conformance cases`)")
    try:
        with open(path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise CaseError(f"{path}: not valid JSON ({e})") from e
    fmt = meta.get("format", "")
    if fmt != FORMAT:
        raise CaseError(f"{path}: format '{fmt}', this harness reads '{FORMAT}'")
    layout = _need(meta, "layout", folder)
    tol = _need(meta, "tolerances", folder)
    docs = list(meta.get("documents") or []) or None
    case = Case(name=meta.get("name", os.path.basename(folder.rstrip("/"))), folder=folder, meta=meta,
                B=int(_need(meta, "B", folder)), S=int(_need(meta, "S", folder)), H=int(_need(meta, "H", folder)),
                HKV=int(_need(meta, "HKV", folder)), D=int(_need(meta, "D", folder)),
                dtype=str(_need(meta, "dtype", folder)), causal=bool(_need(meta, "causal", folder)),
                window=int(meta.get("window", 0) or 0), docs=docs, scale=float(_need(meta, "scale", folder)),
                P=int(_need(meta, "P", folder)), layout=str(layout.get("name", "")),
                positions=[np.asarray(p, dtype=np.int64) for p in layout.get("positions", [])],
                tolerances={k: {key: float(v[key]) for key in ("abs", "rel", "rms", "rms_single_device") if key in v}
                            for k, v in tol.items() if isinstance(v, dict) and "abs" in v},
                title=meta.get("title", ""))
    if case.dtype not in DTYPES:
        raise CaseError(f"{path}: dtype '{case.dtype}' is not one of {', '.join(DTYPES)}")
    if len(case.positions) != case.P:
        raise CaseError(f"{path}: layout.positions has {len(case.positions)} ranks, P = {case.P}")
    for name in OUTPUTS:
        if name not in case.tolerances:
            raise CaseError(f"{path}: no tolerance for {name}")
    for name in INPUTS + OUTPUTS:
        npy = os.path.join(folder, name + ".npy")
        if not os.path.exists(npy):
            raise CaseError(f"case {case.name}: {name}.npy is missing in {folder}; write the cases again with "
                            "`ringlab conformance cases DIR --force`")
        try:
            dtype = _npy_dtype(npy)
        except Exception as e:
            raise CaseError(f"case {case.name}: {name}.npy cannot be read ({e})") from e
        check_file_dtype(case.name, folder, name, dtype)
    return case


def list_cases(root: str) -> List[str]:
    """The case folders under root, in suite.json's order (or sorted), or root itself if it is one."""
    if not os.path.isdir(root):
        raise CaseError(f"{root}: no such directory (write the cases with `ringlab conformance cases {root}`)")
    if os.path.exists(os.path.join(root, "case.json")):
        return [root]
    suite = os.path.join(root, "suite.json")
    if os.path.exists(suite):
        try:
            with open(suite) as f:
                names = json.load(f)["cases"]
        except (OSError, ValueError, KeyError) as e:
            raise CaseError(f"{suite}: not a suite index ({e})") from e
        return [os.path.join(root, n) for n in names]
    folders = sorted(os.path.join(root, d) for d in os.listdir(root)
                     if os.path.exists(os.path.join(root, d, "case.json")))
    if not folders:
        raise CaseError(f"{root}: no case folders (write them with `ringlab conformance cases {root}`)")
    return folders
