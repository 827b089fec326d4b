package protocol

import "slices"

// Size classes of a job stub.
const (
	SizeClassSmall     = "small"
	SizeClassMedium    = "medium"
	SizeClassLarge     = "large"
	SizeClassUnbounded = "unbounded"
)

// Backend classes of a capability.
const (
	BackendClassHTTP    = "http"
	BackendClassProcess = "process"
)

// Offer scopes of a capability: whose jobs a daemon offers a model to.
const (
	OfferScopeSelf   = "self"
	OfferScopeNamed  = "named"
	OfferScopePublic = "public"
)

// The value sets the strict decoders accept, one per enum field.
var (
	kinds          = []string{KindGenerate, KindChat}
	audiences      = []string{AudienceSelf, AudienceNamed, AudiencePublic}
	sizeClasses    = []string{SizeClassSmall, SizeClassMedium, SizeClassLarge, SizeClassUnbounded}
	directions     = []string{DirectionPayload, DirectionResult}
	dispositions   = []string{DispositionOK, DispositionError, DispositionCanceled}
	releaseReasons = []string{ReasonShutdown, ReasonPause, ReasonRevoked, ReasonBackendDown, ReasonRefused}
	backendClasses = []string{BackendClassHTTP, BackendClassProcess}
	offerScopes    = []string{OfferScopeSelf, OfferScopeNamed, OfferScopePublic}

	// backendIDs are the 18 backends protocol "0" knows (relay-behaviour.md RB-A6.1).
	backendIDs = []string{
		"ollama", "mlx", "llamacpp", "vllm", "lmstudio", "jan", "localai",
		"anthropic", "openai", "gemini", "grok", "groq", "openrouter",
		"together", "deepseek", "mistral", "openai-http", "claude-cli",
	}
)

// BackendIDs returns the backend ids a Capability may name, in a fresh
// slice the caller may keep or change.
func BackendIDs() []string { return slices.Clone(backendIDs) }
