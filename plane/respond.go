package plane

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// writeJSON sends v as the reference does: content-type application/json
// with no charset, and JSON.stringify's bytes (no HTML escaping, no newline).
func writeJSON(c echo.Context, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return writeRefusal(c, serverError)
	}
	c.Response().Header().Set(echo.HeaderContentType, "application/json")
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return err
}

// writeRefusal sends a refusal. A refusal that asks the caller to come back
// later says when twice, in the body's retryAfter and in Retry-After, both in
// whole seconds as WireError defines them (decision D1).
func writeRefusal(c echo.Context, r *protocol.Refusal) error {
	if r.Body.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.FormatInt(r.Body.RetryAfter, 10))
	}
	return writeJSON(c, r.Status, r.Body)
}

// serverError is the answer when the store cannot answer.
var serverError = protocol.StoreUnavailable()

// storeFailure logs a store error and answers 503.
func storeFailure(c echo.Context, logger *slog.Logger, op string, err error) error {
	logger.LogAttrs(c.Request().Context(), slog.LevelError, "store operation failed",
		slog.String("op", op), slog.String("request_id", requestID(c)), slog.String("error", err.Error()))
	return writeRefusal(c, serverError)
}

var errTooLarge = errors.New("request body too large")

func readCapped(r io.Reader, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, errTooLarge
	}
	return body, nil
}

const (
	requestIDKey = "relayd.request_id"
	routeKey     = "relayd.route"
)

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

func requestID(c echo.Context) string {
	id, _ := c.Get(requestIDKey).(string)
	return id
}

// requestLog tags each request with an id (the caller's X-Request-ID when it
// sends a sane one) and logs one line when it ends. It logs no body, no
// signature and no query: nothing a caller sent beyond its route.
// observer is told when requests begin and are answered; either may be nil.
type observer struct {
	started  func()
	answered func(route string, status int, took time.Duration)
}

func requestLog(logger *slog.Logger, observe observer) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			if observe.started != nil {
				observe.started()
			}
			id := c.Request().Header.Get("X-Request-ID")
			if id == "" || len(id) > 128 {
				id = uuid.NewString()
			}
			c.Set(requestIDKey, id)
			c.Response().Header().Set("X-Request-ID", id)
			err := next(c)
			took := time.Since(start)
			if observe.answered != nil {
				observe.answered(routeOf(c), c.Response().Status, took)
			}
			logger.LogAttrs(c.Request().Context(), slog.LevelInfo, "request",
				slog.String("request_id", id),
				slog.String("method", c.Request().Method),
				slog.String("path", c.Request().URL.EscapedPath()),
				slog.Int("status", c.Response().Status),
				slog.Duration("duration", took),
			)
			return err
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
					if !c.Response().Committed {
						err = writeRefusal(c, internalError())
					}
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

// leaseRefusal maps a store refusal on a lease-scoped daemon call to the
// reference's wire answer (A7.2), with relayd's G9 and D11 refusals added.
func leaseRefusal(code store.RefusalCode) *protocol.Refusal {
	switch code {
	case store.RefusedNotFound:
		return protocol.Refuse(protocol.CodeNotFound, protocol.MsgUnknownJob)
	case store.RefusedNotHolder:
		return protocol.RefuseWith(http.StatusForbidden, protocol.CodeUnauthorized, protocol.MsgNotHolder)
	case store.RefusedStaleLease:
		return protocol.RefuseWith(http.StatusForbidden, protocol.CodeUnauthorized, protocol.MsgStaleLease)
	case store.RefusedNotReady:
		return protocol.Refuse(protocol.CodeNotReady, protocol.MsgNotSealed)
	case store.RefusedFinished:
		return protocol.Refuse(protocol.CodeTooLate, protocol.MsgAlreadyFinished)
	case store.RefusedOtherDevice:
		return protocol.Refuse(protocol.CodeBadRequest, protocol.MsgResultFromOtherDevice)
	}
	return nil
}
