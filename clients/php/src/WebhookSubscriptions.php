<?php

declare(strict_types=1);

namespace Pont;

/**
 * The instance's webhooks module: subscriptions, replay, and the same two helpers as \Pont\Webhooks.
 *
 * @phpstan-import-type WebhookDeliveryPage from Types
 * @phpstan-import-type WebhookEventDeliveries from Types
 * @phpstan-import-type WebhookReplay from Types
 * @phpstan-import-type WebhookSecretRotation from Types
 * @phpstan-import-type WebhookSubscription from Types
 * @phpstan-import-type WebhookSubscriptionCreated from Types
 * @phpstan-import-type RequestOptions from Transport
 */
final class WebhookSubscriptions extends Module
{
    use Paging;

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

    /** The subscriptions ($answer['subscriptions'], one page). @param RequestOptions $options @return array{subscriptions: list<WebhookSubscription>} */
    #[Paged]
    public function list(array $options = []): array
    {
        return $this->listed($this->singleList('/api/v1/connect/webhooks/subscriptions', [], 'subscriptions', $options));
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
     * Delivery history, newest first: the first page. autoPagingIterator('deliveries', …) yields every delivery,
     * page by page (next_cursor).
     *
     * @param array{status?: string, subscription_id?: string, limit?: int, cursor?: string} $query
     * @param RequestOptions $options
     * @return WebhookDeliveryPage
     */
    #[Paged]
    public function deliveries(array $query = [], array $options = []): array
    {
        return $this->listed($this->cursorList('/api/v1/connect/webhooks/deliveries', $query, 'deliveries', $options));
    }

    /** Every delivery of one event, with its attempts ($answer['deliveries'], one page). @param RequestOptions $options @return WebhookEventDeliveries */
    #[Paged]
    public function eventDeliveries(string $eventId, array $options = []): array
    {
        self::required('webhooks->eventDeliveries', ['eventId' => $eventId]);
        return $this->listed($this->singleList('/api/v1/connect/webhooks/events/' . self::segment($eventId) . '/deliveries', [], 'deliveries', $options));
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
