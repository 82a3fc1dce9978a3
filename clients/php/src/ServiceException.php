<?php

declare(strict_types=1);

namespace Pont;

/** Base of every error (interface section 7): status, error code, message and the request id. */
class ServiceException extends \RuntimeException
{
    public function __construct(
        string $message,
        public readonly ?int $status = null,
        public readonly ?string $errorCode = null,
        public readonly ?string $requestId = null,
        public readonly mixed $body = null,
    ) {
        parent::__construct($message, $status ?? 0);
    }

    /**
     * The exception for an error answer (the rule the TypeScript and Python libraries share, see the vectors).
     *
     * @param array<string, string> $headers lower-cased names
     */
    public static function fromResponse(int $status, mixed $body, array $headers): self
    {
        $requestId = $headers['x-request-id'] ?? null;
        if (!is_array($body)) {
            return new ServerError("HTTP $status: the answer is not JSON", $status, null, $requestId, $body);
        }
        $code = is_string($body['error_code'] ?? null) ? $body['error_code'] : null;
        $message = is_string($body['message'] ?? null) ? $body['message'] : "HTTP $status";
        $args = [$message, $status, $code, $requestId, $body];
        return match (true) {
            $status === 401 => new AuthenticationError(...$args),
            $status === 403 && $code === 'CONSENT_REQUIRED' => new ConsentRequiredError(...$args),
            $status === 403 => new AuthorizationError(...$args),
            $status === 404 => new NotFoundException(...$args),
            $status === 409 && $code === 'IDEMPOTENCY_CONFLICT' => new IdempotencyConflictError(...$args),
            $status === 400 || $status === 422 => new ValidationError(...$args),
            $status === 429 => new RateLimitError(...[...$args, self::retryAfter($body, $headers)]),
            $status >= 500 => new ServerError(...$args),
            default => new ServiceException(...$args),
        };
    }

    /** @param array<string, mixed> $body @param array<string, string> $headers */
    private static function retryAfter(array $body, array $headers): ?float
    {
        if (is_int($body['retry_after'] ?? null) || is_float($body['retry_after'] ?? null)) {
            return (float) $body['retry_after'];
        }
        return is_numeric($headers['retry-after'] ?? null) ? (float) $headers['retry-after'] : null;
    }
}
