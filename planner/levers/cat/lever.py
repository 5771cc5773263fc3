"""Cat fusion as a lever: decided on the extraction by planning with and without it (`policy`), the
cats deleted once the plan is written."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from executorch.exir.tensor import TensorSpec

from memplan.plan import Plan
from memplan.planner.graph.extract import Extraction
from memplan.planner.levers.cat.decisions import CatFusion
from memplan.planner.levers.cat.policy import plan_with_cat_fusion
from memplan.planner.levers.cat.report import CatReport
from memplan.planner.levers.cat.rewrite import fuse_cats
from memplan.planner.levers.lever import Decided, Phase, Site


@dataclass(frozen=True)
class CatFusionOptions:
    """`enabled`: place concatenated inputs back to back inside the cat output and remove the cat.

    `relax_alignment` and `partial` are passed on to `cat.analysis.analyze`;
    `allow_growth` keeps fusions that make the arena larger (always, under a
    memory map, where traffic decides).
    """

    enabled: bool = True
    relax_alignment: bool = False
    partial: bool = False
    allow_growth: bool = False


@dataclass(frozen=True)
class CatFusionLever:
    """Cat inputs placed inside the cat output, the cat instruction removed (see the package docstring)."""

    name: ClassVar[str] = "cat fusion"
    keyword: ClassVar[str] = "cat_fusion"
    options_type: ClassVar[type[CatFusionOptions]] = CatFusionOptions
    phase: ClassVar[Phase] = Phase.PROBLEM
    nests: ClassVar[bool] = True
    options: CatFusionOptions

    def decide(self, site: Site, extraction: Extraction | None) -> Decided:
        assert extraction is not None and site.solve is not None, "cat fusion decides by planning"
        cost, problem, removed = site.cost, extraction.problem, site.removed

        def fused_cost(fusion: CatFusion | None, plan: Plan) -> tuple[float, int]:
            assert cost is not None
            if fusion is None:
                return cost(problem, plan, removed)
            return cost(fusion.problem, plan, removed | fusion.instructions_removed)

        fusion, plan, without = plan_with_cat_fusion(
            site.graph_module,
            site.signature,
            extraction,
            site.solve,
            relax_alignment=self.options.relax_alignment,
            partial=self.options.partial,
            allow_growth=self.options.allow_growth or cost is not None,
            cost=fused_cost if cost is not None else None,
        )
        return Decided(
            fusion, bool(fusion.removed), fusion.problem, fusion.instructions_removed, plan, without
        )

    def rewrite(self, site: Site, decided: Decided, spec_of: dict[str, TensorSpec]) -> int:
        return fuse_cats(site.graph_module, decided.decisions, spec_of, site.program_signature)

    def report(self, decided: Decided, plan: Plan | None, rewritten: int) -> CatReport:
        assert plan is not None
        return CatReport.of(decided.decisions, plan, decided.without, rewritten)
