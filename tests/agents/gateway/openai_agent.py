"""A search agent written with the official openai client, as a user would write it: the model
writes a search query, reads the results and answers. searchgym trains it unchanged."""


def run(question, client, tools):
    messages = [{"role": "user", "content": f"Write a search query to answer: {question}"}]
    query = ask(client, messages)
    results = tools.search(query=query)
    messages += [
        {"role": "assistant", "content": query},
        {"role": "user", "content": f"{results}\n\nAnswer '{question}' in a few words."},
    ]
    return ask(client, messages)


def ask(client, messages):
    reply = client.chat.completions.create(model="policy", messages=messages, max_tokens=32)
    return reply.choices[0].message.content.strip()
