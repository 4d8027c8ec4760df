// The Azure Scheduler stand-in in one resource group: a Flex Consumption Function App running as a
// user-assigned identity, its storage account with shared-key access off, monitoring, and an
// optional Service Bus namespace for jobs to send to. `azd up` deploys it (see azure.yaml).
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; with the subscription and location it seeds every default resource name.')
param environmentName string

@minLength(1)
@description('Region of every resource. It must offer the Flex Consumption plan (az functionapp list-flexconsumption-locations).')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

// Every name can be chosen; empty means a name derived from the environment.
param resourceGroupName string = ''
param functionAppName string = ''
param appServicePlanName string = ''
param storageAccountName string = ''
param identityName string = ''
param logAnalyticsName string = ''
param applicationInsightsName string = ''
param serviceBusNamespaceName string = ''

@description('Also create a Service Bus namespace (Standard: queues and topics) with a send-only key for jobs.')
param deployServiceBus bool = false

@description('NCRONTAB (seconds first) of the timer that moves due attempts from the due index to the queue.')
param tickSchedule string = '0 * * * * *'

@description('NCRONTAB of the daily retention clean-up.')
param cleanupSchedule string = '0 30 3 * * *'

@minValue(1)
@maxValue(3600)
@description('How far ahead each tick reads the due index, in seconds.')
param lookaheadSeconds int = 90

@description('Hosts and CIDR ranges that HTTP actions may reach although private or link-local. Empty: none.')
param outboundAllowlist string = ''

@description('Service Bus endpoint suffix of this cloud.')
param serviceBusEndpointSuffix string = 'servicebus.windows.net'

@maxValue(1000)
param maximumInstanceCount int = 100

@allowed([512, 2048, 4096])
param instanceMemoryMB int = 2048

@description('Executor instances kept warm (billed while idle). 0: the first run after a quiet spell waits for a cold start.')
param alwaysReadyInstances int = 0

@description('Client id of the Entra ID app registration callers sign in to, with the app roles Scheduler.Reader, Scheduler.Operator and Scheduler.Contributor (docs/deployment.md). Empty: no sign-in, the administrator key only.')
param authClientId string = ''

@description('Tenant of that app registration. Default: the tenant of this deployment.')
param authTenantId string = tenant().tenantId

@secure()
@description('The administrator key (x-functions-key header or ?code=), which opens everything. Empty: no key opens anything, only signed-in callers with a role get in.')
param administratorKey string = ''

@description('Alerts on failed executions, poison messages, a silent timer and lateness (docs/deployment.md#metrics-and-alerts).')
param alertsEnabled bool = true

@description('The e-mail address the alerts go to; empty: they show in the Azure portal only.')
param alertEmailAddress string = ''

@description('The lateness alert fires when the 95th percentile over 15 minutes exceeds this many milliseconds.')
param latenessP95ThresholdMs int = 10000

var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var appName = !empty(functionAppName) ? functionAppName : 'func-scheduler-${resourceToken}'

resource group 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: !empty(resourceGroupName) ? resourceGroupName : 'rg-${environmentName}'
  location: location
  tags: tags
}

module identity 'app/identity.bicep' = {
  name: 'identity'
  scope: group
  params: {
    name: !empty(identityName) ? identityName : 'id-scheduler-${resourceToken}'
    location: location
    tags: tags
  }
}

module storage 'app/storage.bicep' = {
  name: 'storage'
  scope: group
  params: {
    name: !empty(storageAccountName) ? storageAccountName : 'stscheduler${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: 'app-package-${take(appName, 32)}'
  }
}

module monitoring 'app/monitoring.bicep' = {
  name: 'monitoring'
  scope: group
  params: {
    logAnalyticsName: !empty(logAnalyticsName) ? logAnalyticsName : 'log-scheduler-${resourceToken}'
    applicationInsightsName: !empty(applicationInsightsName) ? applicationInsightsName : 'appi-scheduler-${resourceToken}'
    location: location
    tags: tags
    alertsEnabled: alertsEnabled
    alertEmailAddress: alertEmailAddress
    latenessP95ThresholdMs: latenessP95ThresholdMs
  }
}

module rbac 'app/rbac.bicep' = {
  name: 'rbac'
  scope: group
  params: {
    storageAccountName: storage.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    principalId: identity.outputs.principalId
  }
}

module api 'app/api.bicep' = {
  name: 'api'
  scope: group
  params: {
    name: appName
    planName: !empty(appServicePlanName) ? appServicePlanName : 'plan-scheduler-${resourceToken}'
    location: location
    tags: tags
    storageAccountName: storage.outputs.name
    deploymentContainerName: storage.outputs.deploymentContainerName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    identityId: identity.outputs.id
    identityClientId: identity.outputs.clientId
    tickSchedule: tickSchedule
    cleanupSchedule: cleanupSchedule
    lookaheadSeconds: lookaheadSeconds
    outboundAllowlist: outboundAllowlist
    serviceBusEndpointSuffix: serviceBusEndpointSuffix
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
    alwaysReadyInstances: alwaysReadyInstances
    authClientId: authClientId
    authTenantId: authTenantId
    administratorKey: administratorKey
  }
  // The host reads its storage as the identity from the first start: roles first.
  dependsOn: [rbac]
}

module serviceBus 'app/servicebus.bicep' = if (deployServiceBus) {
  name: 'serviceBus'
  scope: group
  params: {
    name: !empty(serviceBusNamespaceName) ? serviceBusNamespaceName : 'sb-scheduler-${resourceToken}'
    location: location
    tags: tags
  }
}

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = group.name
output AZURE_FUNCTION_APP_NAME string = api.outputs.name
output SCHEDULER_API_URL string = api.outputs.url
output SERVICE_BUS_NAMESPACE string = deployServiceBus ? serviceBus.outputs.name : ''
