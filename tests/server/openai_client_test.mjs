// The official `openai` npm client against the server: `diffgemma serve` on the embedded model (any weights:
// the protocol, not the words) for models, chat, completions and responses with and without streaming, usage,
// prefix reuse, errors, schema-valid JSON (response_format json_schema), a tool call that validates and a strict
// tool's calls constrained to its schema (an integer; a nested object with an enum and an array); the server
// with scripted replies (dg_scripted_server) for tool calls (chat and responses), a call repaired and a repair
// that fails, the SDK's tool runner and responses stream helper, reasoning and stop strings. Run by
// openai_client.sh (ctest: server.openai_npm_client).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const { OpenAI } = require(path.join(process.env.DG_NODE_MODULES, 'openai'));

// Starts a server command, resolves with its base URL once it prints "listening on http://...".
function startServer(cmd, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) resolve({ child, url: m[1], log: () => log });
    });
    child.on('exit', (code) => reject(new Error(`${cmd} exited with ${code} before listening:\n${log}`)));
    setTimeout(() => reject(new Error(`${cmd} did not start in 60 s:\n${log}`)), 60000);
  });
}

function stopServer(s) {
  return new Promise((resolve) => {
    if (s.child.exitCode !== null) return resolve(s.child.exitCode);
    s.child.on('exit', (code, signal) => resolve(code ?? signal));
    s.child.kill('SIGTERM');
  });
}

const tests = [];
const test = (name, fn) => tests.push({ name, fn });
const fast = { max_tokens: 8, steps: 2, seed: 5 };  // extra fields (steps, seed) pass through the SDK's body
const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

// The text of a response's message items (the SDK adds output_text to responses.create results only).
const textOf = (r) => r.output.filter((o) => o.type === 'message').flatMap((o) => o.content)
  .filter((c) => c.type === 'output_text').map((c) => c.text).join('');

// ---- diffgemma serve on the embedded model ----
let real;
const realClient = () => new OpenAI({ baseURL: `${real.url}/v1`, apiKey: 'sk-node-test', maxRetries: 0 });

test('models.list lists the served model', async () => {
  const page = await realClient().models.list();
  assert.deepEqual(page.data.map((m) => m.id), ['dg-tiny']);
});

test('chat.completions.create answers with an OpenAI chat.completion', async () => {
  const r = await realClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'Hello there' }], ...fast,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason), r.choices[0].finish_reason);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.ok(r.usage.completion_tokens <= 8);
});

test('streamed chat: role first, deltas, one finish, usage last', async () => {
  const stream = await realClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'Stream please' }], stream: true,
    stream_options: { include_usage: true }, ...fast,
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.ok(chunks.length >= 3, `${chunks.length} chunks`);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const finishes = chunks.filter((c) => c.choices.length && c.choices[0].finish_reason);
  assert.equal(finishes.length, 1);
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.ok(last.usage.completion_tokens <= 8);
  for (const c of chunks) assert.equal(c.id, chunks[0].id);
});

test('the SDK stream helper assembles the same kind of completion', async () => {
  const runner = realClient().chat.completions.stream({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'Helper' }], ...fast,
  });
  let deltas = '';
  runner.on('content', (d) => { deltas += d; });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content ?? '', deltas);
});

test('completions.create, plain and streamed', async () => {
  const c = realClient();
  const r = await c.completions.create({ model: 'dg-tiny', prompt: 'The sky is', ...fast });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  const s = await c.completions.create({ model: 'dg-tiny', prompt: 'The sky is', stream: true, ...fast });
  let finishes = 0;
  for await (const ch of s) if (ch.choices[0]?.finish_reason) finishes += 1;
  assert.equal(finishes, 1);
});

test('a second turn is served from the cache (prompt_tokens_details.cached_tokens)', async () => {
  const c = realClient();
  const messages = [{ role: 'user', content: 'First turn' }];
  const r1 = await c.chat.completions.create({ model: 'dg-tiny', messages, ...fast });
  messages.push(r1.choices[0].message, { role: 'user', content: 'Second turn' });
  const r2 = await c.chat.completions.create({ model: 'dg-tiny', messages, ...fast });
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > r1.usage.prompt_tokens, `cached ${cached} of ${r2.usage.prompt_tokens}`);
});

test('models.retrieve finds the served model and 404s another', async () => {
  const m = await realClient().models.retrieve('dg-tiny');
  assert.equal(m.id, 'dg-tiny');
  assert.equal(m.object, 'model');
  await assert.rejects(realClient().models.retrieve('gpt-4o'), (e) => e instanceof OpenAI.NotFoundError);
});

test('responses.create answers with a response object, plain and streamed', async () => {
  const c = realClient();
  const r = await c.responses.create({ model: 'dg-tiny', input: 'Hello there', max_output_tokens: 8, steps: 2 });
  assert.equal(r.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(r.status), r.status);
  assert.equal(r.output_text, textOf(r));
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  const stream = c.responses.stream({ model: 'dg-tiny', input: 'Stream please', max_output_tokens: 8, steps: 2 });
  let deltas = '';
  let last;
  stream.on('response.output_text.delta', (e) => { deltas += e.delta; });
  stream.on('event', (e) => { last = e; });
  const final = await stream.finalResponse();
  assert.equal(textOf(final), deltas);
  // The SDK takes its final snapshot from response.completed only: an answer cut at max_output_tokens ends with
  // response.incomplete, whose response has the status (the weights are random, so either may come).
  assert.ok(['response.completed', 'response.incomplete'].includes(last.type), last.type);
  assert.equal(last.response.status, last.type.slice('response.'.length));
  assert.equal(last.response.output_text ?? textOf(last.response), deltas);
});

test('errors arrive as the SDK error classes', async () => {
  const bad = new OpenAI({ baseURL: `${real.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(
    realClient().chat.completions.create({ model: 'dg-tiny', messages: [], max_tokens: 4 }),
    (e) => e instanceof OpenAI.BadRequestError && /messages/.test(e.message),
  );
  await assert.rejects(
    realClient().chat.completions.create({ model: 'dg-tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 0 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'max_tokens',
  );
});

// Structured output on the embedded model: the constraint makes any weights answer in the schema.
const colourSchema = {
  type: 'object', additionalProperties: false, required: ['colour', 'count', 'name'],
  properties: { colour: { enum: ['red', 'green', 'blue'] }, count: { type: 'integer' }, name: { type: 'string' } },
};
const cityListSchema = {
  type: 'object', required: ['city', 'tags'],
  properties: {
    city: { type: 'object', required: ['name', 'capital'],
      properties: { name: { type: 'string' }, capital: { type: 'boolean' } } },
    tags: { type: 'array', items: { enum: ['old', 'big', 'cold'] }, minItems: 1, maxItems: 3 },
  },
};

test('response_format json_schema: the content parses and has the schema\'s shape', async () => {
  const ask = (content, schema, seed) => realClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content }], max_tokens: 64, steps: 4, seed,
    response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema } },
  });
  const a = await ask('Describe a colour as JSON.', colourSchema, 11);
  assert.equal(a.choices[0].finish_reason, 'stop');
  const colour = JSON.parse(a.choices[0].message.content);
  assert.deepEqual(Object.keys(colour).sort(), ['colour', 'count', 'name']);
  assert.ok(['red', 'green', 'blue'].includes(colour.colour), colour.colour);
  assert.ok(Number.isInteger(colour.count), String(colour.count));
  assert.equal(typeof colour.name, 'string');
  const b = await ask('Describe Paris as JSON.', cityListSchema, 12);
  const city = JSON.parse(b.choices[0].message.content);
  assert.equal(typeof city.city.name, 'string');
  assert.equal(typeof city.city.capital, 'boolean');
  assert.ok(city.tags.length >= 1 && city.tags.length <= 3, JSON.stringify(city.tags));
  for (const t of city.tags) assert.ok(['old', 'big', 'cold'].includes(t), t);
});

test('an unsupported schema keyword is a BadRequestError naming it', async () => {
  await assert.rejects(
    realClient().chat.completions.create({
      model: 'dg-tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 8,
      response_format: { type: 'json_schema',
        json_schema: { name: 'a', schema: { type: 'object', properties: { a: { type: 'string', minLength: 2 } } } } },
    }),
    (e) => e instanceof OpenAI.BadRequestError && /'minLength'/.test(e.message) && e.param === 'response_format',
  );
});

test('the embedded model\'s tool call validates against its tool', async () => {
  const calculator = {
    type: 'function',
    function: { name: 'calculator', description: 'Evaluates an arithmetic expression and returns the result.',
      parameters: { type: 'object', required: ['expression'],
        properties: { expression: { type: 'string', description: 'The expression, for example 12*7.' } } } },
  };
  const r = await realClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'What is 347 times 29?' }], tools: [calculator],
    max_tokens: 128, seed: 1,
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const call = r.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'calculator');
  assert.equal(typeof JSON.parse(call.function.arguments).expression, 'string');
});

test('a strict tool gets calls that validate: constrained while the canvas is denoised, no repair', async () => {
  // The embedded model writes the expression as a string; declared an integer and strict, the call is constrained.
  const tool = (parameters) => ({ type: 'function', function: { name: 'calculator', strict: true, parameters,
    description: 'Evaluates an arithmetic expression and returns the result.' } });
  const ask = (parameters, seed) => realClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'What is 347 times 29?' }], tools: [tool(parameters)],
    max_tokens: 64, steps: 4, seed, tool_check: 'off',
  });
  const a = await ask({ type: 'object', required: ['expression'], properties: { expression: { type: 'integer' } } }, 1);
  assert.equal(a.choices[0].finish_reason, 'tool_calls');
  assert.ok(Number.isInteger(JSON.parse(a.choices[0].message.tool_calls[0].function.arguments).expression));
  assert.equal(a.usage.diffgemma_tool_attempts, undefined);
  const b = await ask({
    type: 'object', additionalProperties: false, required: ['expression'],
    properties: { expression: { type: 'object', additionalProperties: false, required: ['op', 'operands'],
      properties: { op: { enum: ['add', 'multiply'] },
        operands: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 3 } } } },
  }, 2);
  assert.equal(b.choices[0].finish_reason, 'tool_calls');
  const { expression } = JSON.parse(b.choices[0].message.tool_calls[0].function.arguments);
  assert.ok(['add', 'multiply'].includes(expression.op), expression.op);
  assert.ok(expression.operands.length >= 2 && expression.operands.length <= 3, JSON.stringify(expression));
  for (const x of expression.operands) assert.ok(Number.isInteger(x), String(x));
});

// ---- scripted replies ----
let scripted;

test('a call that fails its schema is repaired: the SDK gets a valid call', async () => {
  const ask = (extra) => scriptedClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'mend the call' }], tools: [weatherTool],
    max_tokens: 64, steps: 2, ...extra,
  });
  const r = await ask({});
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.deepEqual(JSON.parse(r.choices[0].message.tool_calls[0].function.arguments), { city: 'Paris' });
  assert.equal(r.usage.diffgemma_tool_attempts, 1);
  const off = await ask({ tool_check: 'off' });
  assert.deepEqual(JSON.parse(off.choices[0].message.tool_calls[0].function.arguments), { town: 'Paris' });
});

test('a repair that fails ends with finish_reason tool_call_error, nothing to run', async () => {
  const r = await scriptedClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'stubborn call' }], tools: [weatherTool],
    max_tokens: 64, steps: 2,
  });
  assert.equal(r.choices[0].finish_reason, 'tool_call_error');
  assert.equal(r.choices[0].message.tool_calls, undefined);
  assert.equal(r.choices[0].message.content, 'call:get_weather{town:"Paris"}');
  assert.match(r.choices[0].message.diffgemma_tool_call_errors[0].message, /city/);
});
const scriptedClient = () => new OpenAI({ baseURL: `${scripted.url}/v1`, apiKey: 'sk-scripted', maxRetries: 0 });

test('tool calls come back as message.tool_calls with reasoning apart', async () => {
  const r = await scriptedClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools: [weatherTool],
    max_tokens: 64, steps: 2,
  });
  const m = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].type, 'function');
  assert.equal(m.tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: 'Paris' });
  assert.equal(m.reasoning_content, 'The user wants the weather; I will call the tool.');
  assert.equal(m.content, '');
});

test('streamed tool calls assemble in the SDK stream helper', async () => {
  const runner = scriptedClient().chat.completions.stream({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'weather?' }], tools: [weatherTool], max_tokens: 64, steps: 2,
  });
  const done = [];
  runner.on('tool_calls.function.arguments.done', (e) => done.push(e));
  const final = await runner.finalChatCompletion();
  const call = final.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  assert.equal(done.length, 1);
  assert.equal(done[0].name, 'get_weather');
});

test('the SDK tool runner completes the round trip', async () => {
  const calls = [];
  const runner = scriptedClient().chat.completions.runTools({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'What is the weather in Paris?' }], max_tokens: 64, steps: 2,
    tools: [{
      type: 'function',
      function: {
        ...weatherTool.function,
        function: (args) => { calls.push(args); return '18 C, sunny'; },
        parse: JSON.parse,
      },
    }],
  });
  const content = await runner.finalContent();
  assert.equal(content, 'It is 18 C in Paris.');
  assert.deepEqual(calls, [{ city: 'Paris' }]);
});

test('responses: a function call, then its output continues the turn', async () => {
  const tools = [{ type: 'function', ...weatherTool.function }];
  const c = scriptedClient();
  const r = await c.responses.create({
    model: 'dg-tiny', input: 'What is the weather in Paris?', tools, max_output_tokens: 64, steps: 2,
  });
  const call = r.output.find((o) => o.type === 'function_call');
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' });
  const reasoning = r.output.find((o) => o.type === 'reasoning');
  assert.equal(reasoning.content[0].text, 'The user wants the weather; I will call the tool.');
  const input = [{ role: 'user', content: 'What is the weather in Paris?' }, ...r.output,
    { type: 'function_call_output', call_id: call.call_id, output: '18 C, sunny' }];
  const stream = c.responses.stream({ model: 'dg-tiny', input, tools, max_output_tokens: 64, steps: 2 });
  const final = await stream.finalResponse();
  assert.equal(textOf(final), 'It is 18 C in Paris.');
  assert.ok(final.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(final.usage));
  const streamedCall = c.responses.stream({
    model: 'dg-tiny', input: 'weather?', tools, max_output_tokens: 64, steps: 2,
  });
  const done = await streamedCall.finalResponse();
  assert.equal(done.output.find((o) => o.type === 'function_call').name, 'get_weather');
});

test('stop strings cut the answer', async () => {
  const r = await scriptedClient().chat.completions.create({
    model: 'dg-tiny', messages: [{ role: 'user', content: 'count please' }], stop: ['STOP'], max_tokens: 64, steps: 2,
  });
  assert.equal(r.choices[0].message.content, 'one two three ');
  assert.equal(r.choices[0].finish_reason, 'stop');
});

// ---- run ----
let failed = 0;
try {
  real = await startServer(process.env.DG_CLI, ['serve', '-m', process.env.DG_MODEL, '--port', '0', '--api-key',
    'sk-node-test', '--ctx', '2048', '-q']);
  scripted = await startServer(process.env.DG_SCRIPTED_SERVER, [process.env.DG_MODEL, 'sk-scripted']);
  for (const t of tests) {
    try {
      await t.fn();
      console.log(`ok    ${t.name}`);
    } catch (e) {
      failed += 1;
      console.log(`FAIL  ${t.name}\n${e.stack ?? e}`);
    }
  }
} catch (e) {
  failed += 1;
  console.log(`FAIL  setup\n${e.stack ?? e}`);
} finally {
  for (const s of [real, scripted]) {
    if (!s) continue;
    const code = await stopServer(s);
    if (code !== 0) {
      failed += 1;
      console.log(`FAIL  server exit: ${code}\n${s.log()}`);
    }
  }
}
console.log(`${tests.length} tests, ${failed} failed`);
process.exit(failed ? 1 : 0);
