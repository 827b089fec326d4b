package plane

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/protocol"
)

// writeJSON sends v as the reference does: content-type application/json
// with no charset, and JSON.stringify's bytes (no HTML escaping, no newline).
// A value that cannot be encoded is answered as a server error, by the
// writer.
func writeJSON(c echo.Context, status int, v any) error {
	if raw, ok := v.(codec.RawJSON); ok {
		// Rendered already (a results answer, kept between polls).
		c.Response().Header().Set(echo.HeaderContentType, "application/json")
		c.Response().WriteHeader(status)
		_, err := c.Response().Write(raw)
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return serverError
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/json")
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return err
}

// errorWriter is echo's error handler, the one writer of every answer that
// is not a success: a refusal as it stands; a store failure logged under its
// operation and answered 503, retryable; echo's own routing errors as the
// unknown-path 404; anything else, a bug like a panic, logged and answered
// 500.
func errorWriter(logger *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return // the answer is on its way; a write error has nowhere to go
		}
		var (
			refusal codec.Refusal
			failure *codec.StoreFailure
			routing *echo.HTTPError
		)
		switch {
		case errors.As(err, &refusal):
		case errors.As(err, &failure):
			logger.LogAttrs(c.Request().Context(), slog.LevelError, "store operation failed",
				slog.String("op", failure.Op.String()), slog.String("request_id", requestID(c)), slog.String("error", failure.Err.Error()))
			refusal = serverError
		case errors.As(err, &routing):
			refusal = protocol.NotFoundPath()
		default:
			logger.LogAttrs(c.Request().Context(), slog.LevelError, "request failed",
				slog.String("request_id", requestID(c)), slog.String("error", err.Error()))
			refusal = internalError()
		}
		_ = writeRefusal(c, refusal)
	}
}

// writeRefusal sends a refusal of any protocol. A refusal that asks the
// caller to come back later says when twice, in the body's retryAfter and
// in Retry-After, both in whole seconds as WireError defines them
// (decision P2-D1).
func writeRefusal(c echo.Context, r codec.Refusal) error {
	status, body, retryAfter := r.Wire()
	if retryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.FormatInt(retryAfter, 10))
	}
	return writeJSON(c, status, body)
}

// serverError is the answer when the store cannot answer.
var serverError = protocol.StoreUnavailable()

const routeKey = "relayd.route"

// setRoute names the route a request was dispatched to, for metrics.
func setRoute(c echo.Context, route string) { c.Set(routeKey, route) }

// routeOf is the route a request was dispatched to; requests that matched
// nothing share one label so that strangers cannot grow the series.
func routeOf(c echo.Context) string {
	if r, ok := c.Get(routeKey).(string); ok {
		return r
	}
	if p := c.Path(); p != "" && p != "/*" && p != "/" {
		return p
	}
	return "unmatched"
}

func requestID(c echo.Context) string { return codec.RequestID(c.Request().Context()) }

// observer is told when requests begin and are answered; either may be nil.
type observer struct {
	started  func()
	answered func(route string, status int, took time.Duration)
}

// requestLog tags each request with an id (the caller's X-Request-ID when it
// sends a sane one), has the writer answer any error, and logs one line
// when the request ends. It logs no body, no signature and no query:
// nothing a caller sent beyond its route.
func requestLog(logger *slog.Logger, observe observer) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if observe.started != nil {
				observe.started()
			}
			req := c.Request()
			path := req.URL.EscapedPath() // before dot segments are resolved
			id := req.Header.Get("X-Request-ID")
			if id == "" || len(id) > 128 {
				id = uuid.NewString()
			}
			c.SetRequest(req.WithContext(codec.WithRequestID(req.Context(), id)))
			c.Response().Header().Set("X-Request-ID", id)
			if err := next(c); err != nil {
				c.Error(err)
			}
			took := time.Since(start)
			if observe.answered != nil {
				observe.answered(routeOf(c), c.Response().Status, took)
			}
			logger.LogAttrs(c.Request().Context(), slog.LevelInfo, "request",
				slog.String("request_id", id),
				slog.String("method", req.Method),
				slog.String("path", path),
				slog.Int("status", c.Response().Status),
				slog.Duration("duration", took),
			)
			return nil
		}
	}
}

// recoverPanics turns a panic, which is always a bug, into a logged JSON 500
// instead of a dropped connection.
func recoverPanics(logger *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				if p := recover(); p != nil {
					logger.Error("panic while serving a request", slog.String("request_id", requestID(c)), slog.Any("panic", p))
					err = internalError()
				}
			}()
			return next(c)
		}
	}
}

// internalError answers a panic: a server error the caller may retry.
func internalError() *protocol.Refusal {
	r := protocol.RefuseWith(http.StatusInternalServerError, protocol.CodeServerError, "internal error")
	r.Body.RetryAfter = 1
	return r
}
