from edge.cache import keys as cache_key
from shared.schemas import ChatCompletionRequest


def req(**kw: object) -> ChatCompletionRequest:
    base: dict[str, object] = {
        "model": "auto",
        "temperature": 0,
        "messages": [{"role": "user", "content": "hi"}],
    }
    base.update(kw)
    return ChatCompletionRequest.model_validate(base)


def part(r: ChatCompletionRequest, tenant: str = "t1", emb: str = "e1") -> str:
    return cache_key.partition_key(r, tenant=tenant, embedder_id=emb)


def test_partition_changes_with_every_answer_parameter() -> None:
    base = part(req())
    variants = [
        req(temperature=0.5),
        req(top_p=0.5),
        req(stop=["x"]),
        req(seed=1),
        req(response_format={"type": "json_object"}),
        req(max_tokens=500),
        req(model="other"),
        req(tools=[{"type": "function", "function": {"name": "f"}}]),
        req(
            messages=[{"role": "system", "content": "be terse"}, {"role": "user", "content": "hi"}]
        ),
        req(presence_penalty=1.0),
        req(top_k=5),
        req(repetition_penalty=1.1),
    ]
    keys = {part(v) for v in variants}
    assert base not in keys and len(keys) == len(variants)
    assert part(req(), tenant="t2") != base
    assert part(req(), emb="e2") != base


def test_partition_ignores_prompt_and_similar_max_tokens() -> None:
    assert part(req(messages=[{"role": "user", "content": "other"}])) == part(req())
    assert part(req(user="someone")) == part(req())
    assert part(req(max_tokens=100)) == part(req(max_tokens=120))


def test_a_tenant_scoped_to_users_has_a_partition_per_user() -> None:
    r = req(user="ann")
    ann = cache_key.partition_key(r, tenant="t1", embedder_id="e1", user="ann")
    bob = cache_key.partition_key(req(user="bob"), tenant="t1", embedder_id="e1", user="bob")
    assert len({ann, bob, part(r)}) == 3
    # Unscoped, the digest is the one every stored entry was written under.
    assert cache_key.partition_key(r, tenant="t1", embedder_id="e1", user=None) == part(r)


def test_context_key_separates_follow_ups() -> None:
    a = [
        {"role": "user", "content": "Who is Obama?"},
        {"role": "assistant", "content": "..."},
        {"role": "user", "content": "How old is he?"},
    ]
    b = [
        {"role": "user", "content": "Who is Biden?"},
        {"role": "assistant", "content": "..."},
        {"role": "user", "content": "How old is he?"},
    ]
    ka = cache_key.context_key(req(messages=a).messages)
    kb = cache_key.context_key(req(messages=b).messages)
    assert ka != kb
    # Whitespace and case in earlier turns do not matter.
    a2 = [dict(m, content=str(m["content"]).upper() + "  ") for m in a]
    assert cache_key.context_key(req(messages=a2).messages) == ka


def test_conversation_text_puts_newest_turn_first() -> None:
    msgs = req(
        messages=[
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three"},
        ]
    ).messages
    assert cache_key.conversation_text(msgs, 2) == "user: three\nassistant: two"
    # The respelled look embeds the same conversation with the last message fixed.
    fixed = cache_key.conversation_text(msgs, 2, last="thre")
    assert fixed == "user: thre\nassistant: two"


def test_cacheable() -> None:
    assert cache_key.is_cacheable(req(), only_deterministic=True)
    assert not cache_key.is_cacheable(req(temperature=None), only_deterministic=True)
    assert not cache_key.is_cacheable(req(temperature=0.7), only_deterministic=True)
    assert cache_key.is_cacheable(req(temperature=0.7), only_deterministic=False)
    assert not cache_key.is_cacheable(req(tools=[{"type": "function"}]), only_deterministic=False)


def test_max_tokens_bucket() -> None:
    assert cache_key.max_tokens_bucket(None) == "none"
    assert cache_key.max_tokens_bucket(1) == "16"
    assert cache_key.max_tokens_bucket(100) == cache_key.max_tokens_bucket(128) == "128"
    assert cache_key.max_tokens_bucket(129) == "256"
