// Package fakemodel is drover's scripted model server: an HTTP server on
// 127.0.0.1 that speaks the vendor model APIs (Anthropic Messages, OpenAI
// Responses, OpenAI Chat Completions, Gemini) well enough for the real agent
// CLIs (Claude Code, Codex, OpenCode, Gemini CLI) to run against it offline,
// in tests and in rehearsals of agent pipelines.
//
// A [Script] decides every answer: rules match the request's prompt with a
// regexp, and each rule's steps are the successive model responses of a
// turn (text, thinking, tool calls by intent, HTTP errors, delays, a stream
// cut mid-way). The server is stateless: which step answers is derived from
// the request itself, so retries and resumed sessions behave predictably.
// Every request is logged ([Server.Requests]) with what the server made of
// it.
//
// Internally the neutral part (resolve.go: what to answer) is kept apart
// from the wire encodings (anthropic.go, responses.go, chat.go, gemini.go);
// a new vendor API is one more file implementing the wire interface.
package fakemodel
