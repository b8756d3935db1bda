from __future__ import annotations
import dataclasses
from typing import List

@dataclasses.dataclass
class Diagnosis:
    cause: str = ""
    details: List[str] = dataclasses.field(default_factory=list)
    def lines(self):
        return [f"likely cause: {self.cause}"] + self.details
    def to_json(self):
        return {"cause": self.cause, "details": self.details}

def diagnose(case, smap, outputs, comparisons):
    return Diagnosis("unknown")
