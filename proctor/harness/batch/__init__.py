"""Many rollouts: the batch runner (local threads or Ray), rollouts JSONL in and records
out, the result cache, retries of infrastructure errors, and the batch summary."""
