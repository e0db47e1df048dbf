"""The request body fields nito_nb knows by name: the one list a keyword is checked against
before it goes into a body (``request_check.check_keywords``). No I/O.

A keyword that is neither an option of the call nor one of these is still sent (gateways have
fields of their own), unless it is a slip of one of them (``temprature``): then the call is
refused with "Did you mean" (``_core/spelling.py``). So the list holds, beside OpenAI's fields,
the documented fields of the servers nito_nb is pointed at that lie within a slip of another
(vLLM's ``min_tokens`` of ``max_tokens``, OpenRouter's ``top_a`` of ``top_p``, ``models`` of the
``model=`` option): a real field must never be taken for a typo.
"""

from __future__ import annotations

__all__ = ["REQUEST_FIELDS"]

#: OpenAI's chat completions request body (platform.openai.com/docs/api-reference/chat/create).
OPENAI = frozenset(
    {
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "messages",
        "metadata",
        "modalities",
        "model",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)

#: Fields of the gateways and servers nito_nb talks to, and the ones it sends itself: Nito's and
#: OpenRouter's (``reasoning``, routing, sampling), vLLM's and llama.cpp's sampling and templating
#: (both serve the OpenAI API), Groq's, Mistral's and the thinking switches of GLM, Qwen and
#: DeepSeek hosts; ``sim``: the simulator's options (docs/SIMULATOR.md).
PROVIDERS = frozenset(
    {
        # Nito, OpenRouter
        "reasoning",
        "include_reasoning",
        "provider",
        "models",
        "route",
        "transforms",
        "plugins",
        "usage",
        "top_k",
        "top_a",
        "min_p",
        "repetition_penalty",
        "debug",
        # vLLM
        "best_of",
        "use_beam_search",
        "length_penalty",
        "stop_token_ids",
        "include_stop_str_in_output",
        "ignore_eos",
        "min_tokens",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "truncate_prompt_tokens",
        "prompt_logprobs",
        "allowed_token_ids",
        "bad_words",
        "echo",
        "add_generation_prompt",
        "continue_final_message",
        "add_special_tokens",
        "documents",
        "chat_template",
        "chat_template_kwargs",
        "mm_processor_kwargs",
        "guided_json",
        "guided_regex",
        "guided_choice",
        "guided_grammar",
        "guided_decoding_backend",
        "guided_whitespace_pattern",
        "structured_outputs",
        "priority",
        "request_id",
        "return_tokens_as_token_ids",
        "cache_salt",
        # llama.cpp's server
        "cache_prompt",
        "n_predict",
        "n_probs",
        "typical_p",
        "tfs_z",
        "mirostat",
        "mirostat_tau",
        "mirostat_eta",
        "min_keep",
        "grammar",
        "json_schema",
        "samplers",
        "id_slot",
        "dry_multiplier",
        "dry_base",
        "dry_allowed_length",
        "xtc_probability",
        "xtc_threshold",
        "timings_per_token",
        # Groq, Mistral, thinking switches
        "reasoning_format",
        "safe_prompt",
        "random_seed",
        "prompt_mode",
        "thinking",
        "enable_thinking",
        # the simulator
        "sim",
    }
)

REQUEST_FIELDS = OPENAI | PROVIDERS
