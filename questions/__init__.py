"""Questions from the news itself (docs/design.md §4 "Questions generated from the corpus"; docs/questions.md).

`generate_questions` drafts forecasting questions from the frozen corpus (the prospective route: a
model with search as of the question date D proposes questions about outcomes after D; the
retrospective route: from an article that reports an outcome on day R, a question dated D = R - h),
and has verifiers rate them. `resolve_questions` lets resolvers vote on each question from articles
visible after D up to R + grace, checks every quote against its article, vets the questions without
trusting the model (answer public at D, post-D facts in the text, near-duplicates, cross-question
exposure, label balance) and imports the accepted ones into the events build (source `generated`).
Every model request and its response is recorded in the workspace, so both rerun with no endpoint.
"""

from typing import Any

__all__ = ["explain_question", "generate_questions", "questions_report", "resolve_questions"]


def __getattr__(name: str) -> Any:  # the public calls, imported on first use (the CLI imports this package cheaply)
    if name == "generate_questions":
        from forecast_env.questions.generate import generate_questions
        return generate_questions
    if name == "resolve_questions":
        from forecast_env.questions.resolve import resolve_questions
        return resolve_questions
    if name in ("questions_report", "explain_question"):
        from forecast_env.questions import report
        return getattr(report, name)
    raise AttributeError(name)
