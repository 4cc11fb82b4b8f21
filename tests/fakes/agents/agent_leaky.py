"""Leaks state between concurrent runs: the prompt is kept on ``self`` across the model call, so
a concurrent run scores its answer against another run's prompt. Sequentially every run scores
1.0; concurrently most score 0.0."""

from fakechat import chat, prompt_of, score


class LeakyAgent:
    current_prompt = None

    async def run(self, data, **extra_kwargs):
        self.current_prompt = prompt_of(data)  # the bug: per-run state on the shared instance
        answer = await chat(self.current_prompt, **extra_kwargs)
        return score(self.current_prompt, answer)
