// Tool declarations shaped like the demo model's tool tuning (tools/train/chat_data.py,
// TOOLS): one string argument each. Shared by tool_calls_test.mjs and tool_probe.mjs.
const fn = (name, description, key) => ({ type: 'function', function: { name, description,
  parameters: { type: 'object', properties: { [key]: { type: 'string' } }, required: [key] } } });
export const weather = fn('get_weather', 'Get the current weather for a city.', 'city');
export const calc = fn('run_python', 'Evaluate a Python expression and return its value.', 'expr');
export const docs = fn('python_doc', 'Look up the documentation of a Python function.', 'name');
export const files = fn('read_file', 'Count the lines of a file in the project.', 'path');
