<?php

declare(strict_types=1);

namespace Pont;

/**
 * The instance's webhooks module: subscriptions, replay, and the same two helpers as \Pont\Webhooks.
 *
 * @phpstan-import-type WebhookReplay from Types
 * @phpstan-import-type WebhookSecretRotation from Types
 * @phpstan-import-type WebhookSubscriptionCreated from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class WebhookSubscriptions extends Module
{
    /**
     * Subscribes an HTTPS endpoint; the answer's webhook_secret is shown only this once.
     *
     * @param list<string> $events
     * @param RequestOptions $options
     * @return WebhookSubscriptionCreated
     */
    public function subscribe(string $callbackUrl, array $events, string $description = '', array $options = []): array
    {
        self::required('webhooks->subscribe', ['callbackUrl' => $callbackUrl, 'events' => $events]);
        return $this->postJson('/api/v1/connect/webhooks/subscriptions', ['callback_url' => $callbackUrl, 'subscribed_events' => array_values($events), 'description' => $description], $options);
    }

    /** The subscriptions ($page['subscriptions']; iterating yields each). @param RequestOptions $options */
    public function list(array $options = []): Page
    {
        return $this->singlePage($this->getJson('/api/v1/connect/webhooks/subscriptions', [], $options), 'subscriptions');
    }

    /**
     * Not retried after a lost answer unless 'idempotency_key' is given (a repeat would answer 404: check list()).
     *
     * @param RequestOptions $options
     */
    public function unsubscribe(string $subscriptionId, array $options = []): void
    {
        self::required('webhooks->unsubscribe', ['subscriptionId' => $subscriptionId]);
        $this->http->request('DELETE', '/api/v1/connect/webhooks/subscriptions/' . self::segment($subscriptionId), options: $options);
    }

    /** @param RequestOptions $options @return WebhookReplay */
    public function replay(string $eventId, array $options = []): array
    {
        self::required('webhooks->replay', ['eventId' => $eventId]);
        return $this->postJson('/api/v1/connect/webhooks/events/' . self::segment($eventId) . '/replay', null, $options);
    }

    /**
     * Replaces the subscription's signing secret (the answer's webhook_secret, shown only this once). For
     * $overlapSeconds (server default 86400; 0: none) deliveries are signed with both secrets.
     *
     * @param RequestOptions $options
     * @return WebhookSecretRotation
     */
    public function rotateSecret(string $subscriptionId, ?int $overlapSeconds = null, array $options = []): array
    {
        self::required('webhooks->rotateSecret', ['subscriptionId' => $subscriptionId]);
        return $this->postJson('/api/v1/connect/webhooks/subscriptions/' . self::segment($subscriptionId) . '/rotate-secret', self::overlap($overlapSeconds), $options);
    }

    /**
     * Delivery history, newest first; iterating the Page yields every delivery, page by page.
     *
     * @param array{status?: string, subscription_id?: string, limit?: int, cursor?: string} $query
     * @param RequestOptions $options
     */
    public function deliveries(array $query = [], array $options = []): Page
    {
        return $this->cursorPage('/api/v1/connect/webhooks/deliveries', $query, 'deliveries', $options);
    }

    /** Every delivery of one event, with its attempts. @param RequestOptions $options */
    public function eventDeliveries(string $eventId, array $options = []): Page
    {
        self::required('webhooks->eventDeliveries', ['eventId' => $eventId]);
        return $this->singlePage($this->getJson('/api/v1/connect/webhooks/events/' . self::segment($eventId) . '/deliveries', [], $options), 'deliveries');
    }

    public function verifySignature(string $rawBody, ?string $signatureHeader, string $secret, int $tolerance = Webhooks::DEFAULT_TOLERANCE, ?int $now = null): bool
    {
        return Webhooks::verifySignature($rawBody, $signatureHeader, $secret, $tolerance, $now);
    }

    /** @return array<string, mixed> */
    public function parseEvent(string $rawBody, ?string $signatureHeader, string $secret, int $tolerance = Webhooks::DEFAULT_TOLERANCE, ?int $now = null): array
    {
        return Webhooks::parseEvent($rawBody, $signatureHeader, $secret, $tolerance, $now);
    }
}
