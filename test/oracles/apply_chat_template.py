#!/usr/bin/env python3
"""Render a chat template as Transformers' tokenizer.apply_chat_template(..., tokenize=False).

Test oracle for the TypeScript chat-template renderer, written from the behaviour of
Hugging Face Transformers (tokenization_utils_base.get_chat_template/apply_chat_template
and utils/chat_template_utils._compile_jinja_template/render_jinja_template); no
Transformers code is used. Needs only the standard library and jinja2 (>= 3.1).

Usage:
  python3 apply_chat_template.py --tokenizer-config tokenizer_config.json --messages msgs.json
      [--tools tools.json] [--add-generation-prompt] [--kwargs '{"enable_thinking": false}']

The rendered string goes to stdout exactly as is (no newline added). Exit status:
2 bad input or no template, 3 a jinja TemplateError (raise_exception prints
"TemplateError: <message>" on stderr), 4 any other error raised while rendering.
"""
import argparse
import glob
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES: what special_tokens_map may hold.
SPECIAL_TOKENS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token", "additional_special_tokens"]


def fail(msg, code=2):
    sys.stderr.write(msg + "\n")
    sys.exit(code)


class GenerationTag(Extension):
    """Transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # replaces jinja's own tojson, which HTML-escapes and has fewer options
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def token_text(v):
    """A special token from tokenizer_config.json: a string, an AddedToken dict, or a list of those."""
    if isinstance(v, list):
        return [token_text(t) for t in v]
    return v.get("content") if isinstance(v, dict) else v


def load_template(config_path, config, tools):
    template = config.get("chat_template")
    if isinstance(template, list):  # saved as [{"name", "template"}, ...]
        template = {t["name"]: t["template"] for t in template}
    folder = os.path.dirname(os.path.abspath(config_path))
    jinja_file = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(jinja_file):  # a chat_template.jinja file clobbers the config's template
        template = read_text(jinja_file)
    extra = sorted(glob.glob(os.path.join(folder, "additional_chat_templates", "*.jinja")))
    if extra:  # named templates; the main one becomes "default"
        template = {"default": template} if template is not None else {}
        template.update({os.path.basename(p)[:-len(".jinja")]: read_text(p) for p in extra})
    # get_chat_template(chat_template=None, tools)
    if isinstance(template, dict):
        if tools is not None and "tool_use" in template:
            return template["tool_use"]
        if "default" in template:
            return template["default"]
        fail(f"multiple chat templates and no default: {sorted(template)}")
    if template is None:
        fail("tokenizer.chat_template is not set")
    return template


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer-config", required=True)
    ap.add_argument("--messages", required=True)
    ap.add_argument("--tools")
    ap.add_argument("--add-generation-prompt", action="store_true")
    ap.add_argument("--kwargs", default="{}", help="JSON object of extra template variables")
    args = ap.parse_args()
    config, messages = json.loads(read_text(args.tokenizer_config)), json.loads(read_text(args.messages))
    tools = json.loads(read_text(args.tools)) if args.tools else None
    kwargs = json.loads(args.kwargs)
    if not isinstance(kwargs, dict):
        fail("--kwargs must be a JSON object")
    reserved = {"messages", "tools", "documents", "add_generation_prompt"} & set(kwargs)
    if reserved:
        fail(f"--kwargs may not set {sorted(reserved)}")
    template = load_template(args.tokenizer_config, config, tools)

    # tokenizer.special_tokens_map: only the attributes that are set (truthy), as strings
    special = {name: token_text(config[name]) for name in SPECIAL_TOKENS if config.get(name)}
    special = {name: value for name, value in special.items() if value}

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        compiled = env.from_string(template)
        # apply_chat_template: template_kwargs = {**special_tokens_map, **kwargs}
        rendered = compiled.render(messages=messages, tools=tools, documents=None,
                                   add_generation_prompt=args.add_generation_prompt, **{**special, **kwargs})
    except jinja2.exceptions.TemplateError as e:
        fail(f"{type(e).__name__}: {e}", 3)
    except Exception as e:  # e.g. a TypeError from the template's own expressions
        fail(f"{type(e).__name__}: {e}", 4)
    sys.stdout.buffer.write(rendered.encode("utf-8"))  # UTF-8 whatever the locale
    sys.stdout.flush()


if __name__ == "__main__":
    main()
