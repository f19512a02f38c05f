"""Skill proposals from approved Experience (issue #31 item 5): grouping, ordering, limits,
citations, signatures, and the cases that must propose nothing.

Precision over the distill sessions is measured by ``bench/distill_skills.py``; these tests pin
what the module docstring promises on small, realistic groups of one project.
"""

from __future__ import annotations

import pytest

from powercontext_runtime.contract.review import ProposeSkillRequest
from powercontext_runtime.distill.failures import looks_secret
from powercontext_runtime.distill.skills import (
    MIN_EXPERIENCES,
    ApprovedExperienceView,
    SkillLesson,
    propose_skills,
)


def exp(ref: str, situation: str, action: str, outcome: str, lesson: str) -> ApprovedExperienceView:
    return ApprovedExperienceView(f"experience:{ref}", situation, action, outcome, lesson)


OPENAPI = [
    exp(
        "exp_routes:2",
        "After editing `api/routes/orders.py`, `pytest tests/contract -q` failed: AssertionError "
        "in tests/contract/test_openapi.py::test_schema_is_current.",
        "Ran `make openapi` (it regenerates `openapi.json`).",
        "`pytest tests/contract -q` passed after regenerating.",
        "After editing a route, run `make openapi`; `pytest tests/contract` fails otherwise.",
    ),
    exp(
        "exp_client:1",
        "After `make openapi`, `npm run typecheck` in web/ failed: TS2339 on the orders client.",
        "Ran `npm run gen:api` to regenerate `web/src/api/client.ts`.",
        "`npm run typecheck` passed.",
        "The web client is generated from `openapi.json`: after `make openapi`, run "
        "`npm run gen:api` before `npm run typecheck`.",
    ),
]

ALEMBIC = [
    exp(
        "exp_upgrade:1",
        "`pytest` failed: relation does not exist (invoices).",
        "Ran `alembic upgrade head`, then `pytest` again, changing no code in between.",
        "`pytest` passed after `alembic upgrade head`.",
        "Run `alembic upgrade head` before `pytest`.",
    ),
    exp(
        "exp_revision:3",
        "After editing `app/models/invoice.py`, `pytest tests/test_invoices.py -q` failed: "
        "ProgrammingError.",
        "Ran `alembic revision --autogenerate -m 'add due date'` (it regenerates "
        "`alembic/versions/7c1e9a2b4d3f_add_due_date.py`).",
        "`pytest tests/test_invoices.py -q` passed after regenerating.",
        "After editing a model, run `alembic revision --autogenerate` to write the migration.",
    ),
    exp(
        "exp_heads:1",
        "`alembic upgrade head` failed: multiple head revisions are present.",
        "Ran `alembic merge heads -m merge`, then `alembic upgrade head`.",
        "`alembic upgrade head` succeeded and `pytest` passed.",
        "After a rebase, run `alembic merge heads` before `alembic upgrade head`.",
    ),
]

NPM_LOCKFILE = [
    exp(
        "exp_ci:1",
        "CI's `npm ci` failed: `package.json` and `package-lock.json` are not in sync.",
        "Ran `npm install` locally and committed `package-lock.json`.",
        "`npm ci` succeeded in CI.",
        "After editing `package.json`, run `npm install` so `package-lock.json` follows.",
    ),
    exp(
        "exp_lint:1",
        "`npm run lint` failed in CI after a dependency bump: the lockfile pinned the old "
        "eslint plugin.",
        "Ran `npm install`, then `npm run build` to refresh `dist/`.",
        "`npm run lint` passed.",
        "After bumping a dependency, `npm install` then `npm run build` before linting.",
    ),
]

FLAKY = [
    exp(
        f"exp_flaky_{i}:1",
        "`pytest tests/test_ws.py` failed: TimeoutError in tests/test_ws.py::test_reconnect.",
        "Ran `pytest tests/test_ws.py` again, changing nothing.",
        "`pytest tests/test_ws.py` passed on the second run.",
        "`tests/test_ws.py::test_reconnect` is flaky; rerun it before looking for a cause.",
    )
    for i in range(3)
]


def only(skills: list[SkillLesson]) -> SkillLesson:
    assert len(skills) == 1, [s.group for s in skills]
    return skills[0]


def steps(skill: SkillLesson) -> list[str]:
    return [line for line in skill.instructions.splitlines() if line[:1].isdigit()]


def test_the_threshold_is_two_distinct_experiences() -> None:
    assert MIN_EXPERIENCES == 2


def test_openapi_regenerate_then_client_then_contract_tests() -> None:
    skill = only(propose_skills(OPENAPI))
    assert skill.group == "make openapi"
    assert skill.name == "make-openapi-workflow"
    assert skill.evidence == ("experience:exp_client:1", "experience:exp_routes:2")
    lines = steps(skill)
    assert "`make openapi`" in lines[0] and "`npm run gen:api`" in lines[1]
    assert any("`pytest tests/contract -q` passes" in line for line in lines[2:])
    assert "`npm run typecheck` passes." in skill.validation
    assert "`pytest tests/contract -q` passes." in skill.validation
    # every step cites the Experiences it comes from
    assert lines[0].endswith("(experience:exp_routes:2)")
    assert lines[1].endswith("(experience:exp_client:1)")


def test_alembic_revision_before_merge_before_upgrade() -> None:
    skill = only(propose_skills(ALEMBIC))
    assert skill.group == "alembic"
    text = "\n".join(steps(skill))
    upgrade = text.index("alembic upgrade")
    # generate (revision, merge heads) before apply (upgrade); the lesson says merge first
    assert text.index("alembic revision") < upgrade and text.index("alembic merge") < upgrade
    assert len(skill.evidence) == 3
    # `pytest` covers `pytest tests/test_invoices.py -q`: one check, not two
    assert skill.validation.count("`pytest` passes.") == 1
    assert not any("test_invoices" in v for v in skill.validation)


def test_npm_lockfile_and_ci() -> None:
    skill = only(propose_skills(NPM_LOCKFILE))
    assert skill.group == "npm install"
    lines = steps(skill)
    assert "`npm install`" in lines[0] and "`npm run build`" in lines[1]  # set up, then build
    assert set(skill.validation) == {"`npm ci` passes.", "`npm run lint` passes."}


def test_flaky_test_proposes_nothing() -> None:
    # only a check is shared: no step, no procedure, however many times it was approved
    assert propose_skills(FLAKY) == []


def test_singletons_and_unrelated_experiences_propose_nothing() -> None:
    assert propose_skills(OPENAPI[:1]) == []
    assert propose_skills([OPENAPI[0], ALEMBIC[0]]) == []  # share only `pytest`
    assert propose_skills([]) == []


def test_two_revisions_of_one_experience_are_one_experience() -> None:
    # exp_upgrade at revisions 1 and 2 is one artifact: only its newest revision is read
    newer = exp("exp_upgrade:2", *ALEMBIC[1].texts())
    assert propose_skills([ALEMBIC[0], newer]) == []
    skill = only(propose_skills([ALEMBIC[0], newer, ALEMBIC[2]]))
    assert skill.evidence == ("experience:exp_heads:1", "experience:exp_upgrade:2")


def test_near_duplicates_that_say_the_same_propose_nothing() -> None:
    twin = exp("exp_routes_again:1", *OPENAPI[0].texts())
    assert propose_skills([OPENAPI[0], twin]) == []


def test_two_ways_of_installing_are_not_two_steps() -> None:
    peer = exp(
        "exp_peer:1",
        "`npm install` failed: ERESOLVE.",
        "Ran it with `--legacy-peer-deps`: `npm install --legacy-peer-deps`.",
        "`npm install --legacy-peer-deps` succeeded.",
        "Run `npm install` with `--legacy-peer-deps`.",
    )
    ci = exp(
        "exp_ci_vitest:1",
        "`vitest run` failed: Cannot find module (vitest/config).",
        "Ran `npm ci`, then `vitest run` again.",
        "`vitest run` passed after `npm ci`.",
        "Run `npm ci` before `vitest run`.",
    )
    assert propose_skills([peer, ci]) == []


def test_contradicting_orders_propose_nothing() -> None:
    a = exp("exp_a:1", "`make test` failed.", "Ran `make seed`, then `make migrate`.",
            "`make test` passed.", "Seed, then migrate.")  # fmt: skip
    b = exp("exp_b:1", "`make test` failed.", "Ran `make migrate`, then `make seed`.",
            "`make test` passed.", "Migrate, then seed.")  # fmt: skip
    c = exp("exp_c:1", "`make test` failed.", "Ran `make migrate`, then `make build`.",
            "`make test` passed.", "Migrate, then build.")  # fmt: skip
    assert all(s.group != "make seed" for s in propose_skills([a, b]))
    assert propose_skills([a, b]) == []
    assert only(propose_skills([b, c])).group == "make migrate"


def test_nothing_passed_means_no_validation_and_no_skill() -> None:
    failed = [
        exp(ref, s, a, "The task was abandoned.", lesson)
        for ref, (s, a, _, lesson) in (
            ("exp_x:1", ALEMBIC[0].texts()),
            ("exp_y:1", ALEMBIC[1].texts()),
        )
    ]
    assert propose_skills(failed) == []


def test_an_experience_holding_a_secret_is_never_cited() -> None:
    leaky = exp(
        "exp_leak:1",
        "`alembic upgrade head` failed: password authentication failed.",
        "Ran `DATABASE_URL=postgres://app:hunter2hunter2@db/app alembic upgrade head`.",
        "`pytest` passed.",
        "Set the database URL before `alembic upgrade head`.",
    )
    skills = propose_skills([*ALEMBIC[:2], leaky])
    skill = only(skills)
    assert "experience:exp_leak:1" not in skill.evidence
    assert "hunter2" not in skill.instructions
    assert propose_skills([ALEMBIC[0], leaky]) == []


def test_deterministic_and_independent_of_input_order() -> None:
    everything = [*OPENAPI, *ALEMBIC, *NPM_LOCKFILE, *FLAKY]
    forward = propose_skills(everything)
    assert forward == propose_skills(list(reversed(everything)))
    assert [s.group for s in forward] == ["alembic", "make openapi", "npm install"]
    cited = [ref for s in forward for ref in s.evidence]
    assert len(cited) == len(set(cited))  # an Experience backs at most one Skill


def test_within_the_contract_and_citing_exact_revisions() -> None:
    for skill in propose_skills([*OPENAPI, *ALEMBIC, *NPM_LOCKFILE]):
        request = ProposeSkillRequest.model_validate(
            {"scope_id": "s", "proposal": skill.proposal(), "artifact_refs": skill.artifact_refs()}
        )
        assert [f"experience:{r.artifact_id}:{r.revision}" for r in request.artifact_refs] == list(
            skill.evidence
        )
        assert "\n" not in skill.description
        assert skill.name == skill.name.lower() and " " not in skill.name
        assert not any(looks_secret(t) for t in (skill.instructions, *skill.validation))


def test_limits_hold_for_long_texts() -> None:
    long = "x " * 5000
    group = [
        exp(
            f"exp_long_{name}:1",
            long,
            f"Ran `make openapi` and `npm run gen:{name}`.",
            "`npm run typecheck` passed.",
            long,
        )
        for name in ("api", "types")
    ]
    skill = only(propose_skills(group))
    ProposeSkillRequest.model_validate(
        {"scope_id": "s", "proposal": skill.proposal(), "artifact_refs": skill.artifact_refs()}
    )


def test_signature_is_topic_and_sorted_artifact_ids_without_revisions() -> None:
    skill = only(propose_skills(OPENAPI))
    assert skill.signature == "skill|make openapi|exp_client,exp_routes"
    revised = [exp("exp_routes:3", *OPENAPI[0].texts()), OPENAPI[1]]
    assert only(propose_skills(revised)).signature == skill.signature


def test_from_artifact_and_bad_refs() -> None:
    view = ApprovedExperienceView.from_artifact(
        {
            "reference": {"family": "experience", "artifact_id": "exp_1", "revision": 4},
            "content": dict(zip(("situation", "action", "outcome", "lesson"), "abcd", strict=True)),
        }
    )
    assert view.ref == "experience:exp_1:4"
    with pytest.raises(ValueError):
        propose_skills([ApprovedExperienceView("skill:x:1", "a", "b", "c", "d")])
    with pytest.raises(ValueError):
        propose_skills([ApprovedExperienceView("experience:x:0", "a", "b", "c", "d")])
