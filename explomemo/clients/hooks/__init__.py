"""Claude Code's hooks: memos reach the agent unasked, explorations are recorded, and a
delegated exploration is answered from a memo.

``explomemo hook EVENT`` reads the hook's JSON object on stdin and answers in the hook's
JSON on stdout (:func:`~explomemo.clients.hooks.run.run_hook`). One module per event:

* :mod:`~explomemo.clients.hooks.session_start` (SessionStart): a short index of the
  project's fresh memos;
* :mod:`~explomemo.clients.hooks.prompt` (UserPromptSubmit): the memos recorded
  here that answer the prompt;
* :mod:`~explomemo.clients.hooks.stop` (Stop): records a turn that answered a question
  about the code; on opt-in, asks once for a memo;
* :mod:`~explomemo.clients.hooks.delegate` (PreToolUse on ``Agent|Task``): a delegated
  exploration answered from a memo, or the memos handed to it;
* :mod:`~explomemo.clients.hooks.subagent_stop` (SubagentStop): records a delegated run
  that read files and changed none.

Beside them: :mod:`~explomemo.clients.hooks.payload` (the hook's input and answer),
:mod:`~explomemo.clients.hooks.deadline` (when a hook stops reading files),
:mod:`~explomemo.clients.hooks.memos` (the memos a hook works on, checked and quoted),
:mod:`~explomemo.clients.hooks.transcripts` (reading a session's transcript) and
:mod:`~explomemo.clients.hooks.capture` (the rule for recording a turn itself, and the memo
a capture makes and stores).

A hook never breaks the client: whatever goes wrong (a locked or damaged database,
malformed input, anything), it exits 0 with nothing on stdout and one line on stderr (no
database yet is no error: nothing at all). A hook runs before or after every prompt in a
new process: none imports a model, numpy, Pydantic or the MCP SDK, but the delegate hook
when a memo comes near the delegated prompt by words (it then loads the shipped model).
"""
